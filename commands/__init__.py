"""The operator's command-line groups beyond serving: each module registers its
sub-commands on main.py's parser (`register`) and runs them (`run`)."""
