"""The networks of the reference papers' deep experiments (every factory takes a ``seed``).

=====================  ===================================================================
``mlp``                 MLP with hidden layers (512, 256) (FedDeper, MNIST and CIFAR-10)
``cnn``                 a plain conv/pool + fully connected network (small ones for tests)
``feddeper_cnn_mnist``  conv 32 (3x3) -> conv 64 (3x3) -> FC 1024 -> FC 512 -> out (FedDeper)
``feddeper_cnn_cifar``  conv 64 (5x5) -> conv 128 (5x5) -> FC 1024 -> FC 512 -> FC 256 -> out
``lenet5``              LeNet-5 (FedSPS, MNIST)
``resnet18_gn``         ResNet-18 with a 7x7 first convolution and GroupNorm (FedSpeed, CIFAR)
=====================  ===================================================================

FedDeper leaves pooling, activations and padding unspecified (docs/papers/feddeper.md, A11): we use ReLU,
"same" padding and a 2x2 max-pool after each convolution. No model has buffers (no BatchNorm):
running statistics would be client state that no paper defines.
"""
from __future__ import annotations

import torch
from torch import nn


def _seeded(build, seed):
    state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        return build()
    finally:
        torch.random.set_rng_state(state)


def mlp(in_features=784, n_classes=10, hidden=(512, 256), seed=0):
    """Fully connected ReLU network ``in -> hidden... -> n_classes`` (FedDeper's MLP: (512, 256)).

    Parameters
    ----------
    in_features : int, default 784
        Inputs.
    n_classes : int, default 10
        Outputs.
    hidden : tuple of int, default (512, 256)
        Hidden widths.
    seed : int, default 0
        Seed of the initial weights.

    Returns
    -------
    torch.nn.Module
        The network.

    Examples
    --------
    >>> sum(p.numel() for p in mlp(64, 10, hidden=(8,)).parameters())
    610
    """
    def build():
        layers, d = [], in_features
        for h in hidden:
            layers += [nn.Linear(d, h), nn.ReLU()]
            d = h
        return nn.Sequential(*layers, nn.Linear(d, n_classes))
    return _seeded(build, seed)


def _conv_net(in_channels, side, convs, fcs, n_classes):
    layers, c = [], in_channels
    for out, k in convs:
        layers += [nn.Conv2d(c, out, k, padding=k // 2), nn.ReLU(), nn.MaxPool2d(2)]
        c, side = out, side // 2
    layers.append(nn.Flatten())
    d = c * side * side
    for h in fcs:
        layers += [nn.Linear(d, h), nn.ReLU()]
        d = h
    return nn.Sequential(*layers, nn.Linear(d, n_classes))


def cnn(in_channels=1, side=28, convs=((32, 3), (64, 3)), fcs=(1024, 512), n_classes=10, seed=0):
    """A plain CNN: each ``(channels, kernel)`` of ``convs`` is conv ("same" padding) -> ReLU ->
    2x2 max-pool, then fully connected ReLU layers ``fcs`` and the output layer. The FedDeper CNNs
    are instances; small ones make fast tests.

    Parameters
    ----------
    in_channels : int
        Input channels.
    side : int
        Input height and width.
    convs : tuple of (int, int)
        ``(channels, kernel)`` of each convolution.
    fcs : tuple of int
        Widths of the fully connected layers.
    n_classes : int, default 10
        Outputs.
    seed : int, default 0
        Seed of the initial weights.

    Returns
    -------
    torch.nn.Module
        The network.

    Examples
    --------
    >>> sum(p.numel() for p in cnn(1, 8, convs=[(4, 3)], fcs=[16]).parameters())
    1250
    """
    return _seeded(lambda: _conv_net(in_channels, side, list(convs), list(fcs), n_classes), seed)


def feddeper_cnn_mnist(n_classes=10, in_channels=1, side=28, seed=0):
    """FedDeper's MNIST CNN: conv 32 (3x3) -> conv 64 (3x3) -> FC 1024 -> FC 512 -> out.

    Parameters
    ----------
    n_classes : int, default 10
        Outputs.
    in_channels : int
        Input channels.
    side : int
        Input height and width.
    seed : int, default 0
        Seed of the initial weights.

    Returns
    -------
    torch.nn.Module
        The network.
    """
    return _seeded(lambda: _conv_net(in_channels, side, [(32, 3), (64, 3)], [1024, 512], n_classes), seed)


def feddeper_cnn_cifar(n_classes=10, in_channels=3, side=32, seed=0):
    """FedDeper's CIFAR-10 CNN: conv 64 (5x5) -> conv 128 (5x5) -> FC 1024 -> FC 512 -> FC 256 -> out.

    Parameters
    ----------
    n_classes : int, default 10
        Outputs.
    in_channels : int
        Input channels.
    side : int
        Input height and width.
    seed : int, default 0
        Seed of the initial weights.

    Returns
    -------
    torch.nn.Module
        The network.
    """
    return _seeded(lambda: _conv_net(in_channels, side, [(64, 5), (128, 5)], [1024, 512, 256], n_classes), seed)


def lenet5(n_classes=10, in_channels=1, side=28, seed=0):
    """LeNet-5: conv 6 (5x5, pad 2) -> pool -> conv 16 (5x5) -> pool -> 120 -> 84 -> out (ReLU).

    Parameters
    ----------
    n_classes : int, default 10
        Outputs.
    in_channels : int
        Input channels.
    side : int
        Input height and width.
    seed : int, default 0
        Seed of the initial weights.

    Returns
    -------
    torch.nn.Module
        The network.
    """
    def build():
        s = (side // 2 - 4) // 2
        return nn.Sequential(nn.Conv2d(in_channels, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                             nn.Linear(16 * s * s, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
                             nn.Linear(84, n_classes))
    return _seeded(build, seed)


class _Block(nn.Module):
    def __init__(self, cin, cout, stride, groups):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.gn1 = nn.GroupNorm(groups, cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.gn2 = nn.GroupNorm(groups, cout)
        self.short = None
        if stride != 1 or cin != cout:
            self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.GroupNorm(groups, cout))

    def forward(self, x):
        out = torch.relu(self.gn1(self.conv1(x)))
        out = self.gn2(self.conv2(out))
        return torch.relu(out + (x if self.short is None else self.short(x)))


class ResNet18GN(nn.Module):
    """ResNet-18 (basic blocks [2, 2, 2, 2], widths 64-512) with GroupNorm and a 7x7 stride-2 stem
    followed by 3x3 max-pooling, as torchvision's ResNet-18 with BatchNorm replaced by GroupNorm
    (FedSpeed's model, docs/papers/fedspeed.md, §6.1).

    Parameters
    ----------
    n_classes : int, default 10
        Outputs.
    in_channels : int, default 3
        Input channels.
    groups : int, default 2
        GroupNorm groups per layer.
    """

    def __init__(self, n_classes=10, in_channels=3, groups=2):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(in_channels, 64, 7, 2, 3, bias=False), nn.GroupNorm(groups, 64),
                                  nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        blocks, c = [], 64
        for width, stride in [(64, 1), (128, 2), (256, 2), (512, 2)]:
            blocks += [_Block(c, width, stride, groups), _Block(width, width, 1, groups)]
            c = width
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(512, n_classes)

    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


def resnet18_gn(n_classes=10, in_channels=3, groups=2, seed=0):
    """ResNet-18 with GroupNorm (``groups`` groups per layer, 2 as in FedDyn/FedSpeed's code).

    Parameters
    ----------
    n_classes : int, default 10
        Outputs.
    in_channels : int, default 3
        Input channels.
    groups : int, default 2
        GroupNorm groups per layer.
    seed : int, default 0
        Seed of the initial weights.

    Returns
    -------
    torch.nn.Module
        The network.
    """
    return _seeded(lambda: ResNet18GN(n_classes, in_channels, groups), seed)


MODELS = {"mlp": mlp, "cnn": cnn, "feddeper_cnn_mnist": feddeper_cnn_mnist, "feddeper_cnn_cifar": feddeper_cnn_cifar,
          "lenet5": lenet5, "resnet18_gn": resnet18_gn}
