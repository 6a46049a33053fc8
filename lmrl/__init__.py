"""lmrl: multi-turn RL with language models (the LMRL-Gym benchmark, rebuilt in PyTorch)."""

import os

# oneDNN, which runs torch's CPU matmuls under bf16 autocast, keeps a primitive with its scratch memory for every
# input shape it meets, up to 1024 of them; batches padded to their own longest row meet a new shape at nearly
# every step, so a run grows by gigabytes.  A smaller cache costs nothing measurable (`python -m lmrl.bench
# primitive_cache`, README "Speed"); set before torch makes its first primitive, and never over the user's value.
DEFAULT_PRIMITIVE_CACHE = "64"
os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", DEFAULT_PRIMITIVE_CACHE)
