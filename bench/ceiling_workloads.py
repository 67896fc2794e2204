"""The benchmark's workloads (issue 16): a BatchNorm CNN on 3x64x64 images and a small Transformer encoder on
sequences of 256 tokens, both on synthetic data, built from the built-in synthetic workloads' pieces."""

from __future__ import annotations


def bn_cnn_64():
    import torch
    from torch import nn
    from torch.utils.data import TensorDataset

    from advisor.workload import Workload

    num_classes, n = 10, 1024
    g = torch.Generator().manual_seed(1)
    patterns = torch.randn(num_classes, 3, 64, 64, generator=torch.Generator().manual_seed(1234))
    y = torch.randint(0, num_classes, (n,), generator=g)
    x = patterns[y] * 0.5 + torch.randn(n, 3, 64, 64, generator=g)

    def build():
        def block(cin, cout):
            return [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU()]

        return nn.Sequential(*block(3, 32), nn.MaxPool2d(2), *block(32, 64), nn.MaxPool2d(2), *block(64, 64),
                             nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, num_classes))

    data = TensorDataset(x, y)
    return Workload(name="bench-bn-cnn-64", build_model=build, train_data=data, val_data=TensorDataset(x[:64], y[:64]),
                    loss_fn=nn.functional.cross_entropy, task="image-classification", num_classes=num_classes,
                    optimizer="sgd", current_batch_size=64, current_lr=0.1,
                    description="BatchNorm CNN on synthetic 3x64x64 images")


def transformer_256():
    import torch
    from torch import nn
    from torch.utils.data import TensorDataset

    from advisor.workload import Workload
    from advisor.workloads.synthetic import TokenClassifier, _token_data

    vocab, seq_len, num_classes = 1000, 256, 4
    x, y = _token_data(1024, vocab, seq_len, num_classes, torch.Generator().manual_seed(3))
    data = TensorDataset(x, y)
    return Workload(name="bench-transformer-256", build_model=lambda: TokenClassifier(vocab, seq_len, num_classes),
                    train_data=data, val_data=TensorDataset(x[:64], y[:64]), loss_fn=nn.functional.cross_entropy,
                    task="nlp-classification", num_classes=num_classes, optimizer="adamw", current_batch_size=32,
                    current_lr=5e-4, description="2-layer Transformer encoder, sequences of 256 tokens")
