"""map="to_tensor" gives what torchvision's FashionMNIST and ToTensor give
a trainer: the same shapes, dtypes and values, sample for sample."""

import gzip
import os
import shutil

import actorfeed


def test_to_tensor_batches_are_torchvision_s(fashion_mnist, tmp_path):
    import torch
    import torchvision

    raw = tmp_path / "FashionMNIST" / "raw"
    raw.mkdir(parents=True)
    for name in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                 "t10k-labels-idx1-ubyte"):  # torchvision wants all four, unpacked
        with gzip.open(os.path.join(fashion_mnist, f"{name}.gz")) as src, open(raw / name, "wb") as dst:
            shutil.copyfileobj(src, dst)
    ds = torchvision.datasets.FashionMNIST(root=str(tmp_path), train=False, download=False,
                                           transform=torchvision.transforms.ToTensor())
    want_x, want_y = next(iter(torch.utils.data.DataLoader(ds, batch_size=64)))

    data = os.path.join(fashion_mnist, "t10k-images-idx3-ubyte.gz")
    with actorfeed.Loader(data, batch_size=64, shuffle=False, torch=True, map="to_tensor") as loader:
        b = next(iter(loader))
        records = [n.rsplit("#", 1)[1] for n in loader.sample_names(b["ids"])]
    assert b["image"].shape == want_x.shape == (64, 1, 28, 28)
    assert b["image"].dtype == want_x.dtype == torch.float32
    assert b["label"].dtype == want_y.dtype == torch.int64
    assert torch.equal(b["image"], want_x) and torch.equal(b["label"], want_y)
    assert records == [str(i) for i in range(64)]
