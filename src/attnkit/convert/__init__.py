"""Models in and out of other formats: Hugging Face checkpoint folders (MarianMT translators,
GPT-2 language models) read into attnkit's own modules, and attnkit models written back.

A layer of its own between ``models`` and ``inference``: it builds attnkit models from
other formats' files, and the loaders of ``inference`` accept such folders through it.
Nothing here imports transformers; ``hf_files`` reads config.json and the weights
(safetensors, or PyTorch's .bin) directly.
"""
