"""A clinic as one file: its numbers, locations and hours, people, appointment types,
weekly schedules and closures.

`file` reads and checks the file (every problem with its line), `store` applies it to
the database atomically and writes the current state back.
"""
