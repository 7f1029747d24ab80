"""What callers say, made plain: numbers, dates, names, fields, phrase patterns, yes/no answers."""
