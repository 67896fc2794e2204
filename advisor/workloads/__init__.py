"""Built-in workloads: real data (the digits set scikit-learn ships) and synthetic ones.

The table maps names to import targets so listing them imports nothing heavy.
"""

BUILTINS: dict[str, tuple[str, str]] = {
    "digits-cnn": ("advisor.workloads.digits:digits_cnn",
                   "CNN on the 1,797 handwritten digits (8x8 upsampled to 32x32), SGD; image classification"),
    "digits-mlp": ("advisor.workloads.digits:digits_mlp",
                   "MLP on the 64 digit pixels, Adam; image classification"),
    "synthetic-bn-cnn": ("advisor.workloads.synthetic:bn_cnn",
                         "BatchNorm CNN on synthetic 3x32x32 images with class patterns, SGD; image classification"),
    "synthetic-transformer": ("advisor.workloads.synthetic:transformer_classifier",
                              "small Transformer encoder on synthetic token sequences, AdamW; NLP classification"),
}

DEFAULT_WORKLOAD = "digits-cnn"
