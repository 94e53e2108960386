"""The seeds a run may take (no torch import: configs read it)."""

# The loop draws its generators from seed * 1000003 + rank * 10007 + step, which torch takes up
# to 2**64 - 1: 32-bit seeds leave room for any rank and step (flowbench's run seeds are 31-bit).
MAX_SEED = 2**32 - 1
