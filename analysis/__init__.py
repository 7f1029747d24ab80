"""After the call: what a finished call's record says, read off the voice path.

A call's summary (what the caller wanted, what was done, what is left for a person,
concerns), its quality score on five dimensions, the facts and preferences worth
remembering for the patient's next call, and the words the recognizer kept missing.
Each comes from the fast model when one is configured and from transparent rules
otherwise; a model that fails or answers junk leaves the rules' result, marked as such.
"""
