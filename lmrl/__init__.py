"""lmrl: multi-turn RL with language models (the LMRL-Gym benchmark, rebuilt in PyTorch)."""

import os

# oneDNN, which runs torch's CPU matmuls under bf16 autocast, keeps a primitive with its scratch memory for every
# input shape it meets, up to 1024 of them; batches padded to their own longest row meet a new shape at nearly
# every step, so a run grows by gigabytes.  A smaller cache costs nothing measurable (`python -m lmrl.bench
# primitive_cache`, docs/benchmarks.md); set before torch makes its first primitive, and never over the user's value.
DEFAULT_PRIMITIVE_CACHE = "64"
os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", DEFAULT_PRIMITIVE_CACHE)

# transformers ≥ 5.x loads every `from_pretrained` model with `use_kernels=True` and, at each `.train()` /
# `.eval()`, swaps layers for kernels fetched from the Hugging Face Hub for the model's device.  That is code
# downloaded at run time (our machines and most cluster nodes have no route to the Hub), it differs by release,
# and it rejects any device it does not know (the device tests' virtual device).  Off unless the user opts in
# with USE_HUB_KERNELS=YES; the models run the torch implementation transformers ships.
os.environ.setdefault("USE_HUB_KERNELS", "NO")
