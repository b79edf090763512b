"""The hand-written half of the Zeus compatibility table: what cannot work here, and notes.

Keys are full Zeus names or module prefixes (``zeus.optimizer.batch_size.server`` covers every
name below it). ``tools/zeus_compat.py`` checks every other recorded name by importing it.
"""

# Not provided at all: these are the internals of Zeus's HTTP servers and their database, which a
# user's training script never imports.
UNSUPPORTED: dict[str, str] = {}

# Importable, but constructing or calling them raises our one-line error with the reason.
PLACEHOLDERS: dict[str, str] = {}

NOTES: dict[str, str] = {}
