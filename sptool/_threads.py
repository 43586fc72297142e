"""How many threads sptool's parallel steps use (decoding row groups, merging runs, SpMM,
parsing text): the machine's cores, at most 4, since each step's gain flattens beyond that
while its memory in flight grows with every thread."""

import os

THREADS = max(1, min(4, os.cpu_count() or 1))
