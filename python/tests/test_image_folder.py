"""actorfeed convert of an image folder gives the samples, classes and
order of torchvision's ImageFolder over the same directory."""

import json
import os
import subprocess

import actorfeed


def folder(root):
    """Classes with nested directories whose order os.walk's sort decides
    ("x-1" before "x/y"), upper-case extensions, and files that are no
    image."""
    from PIL import Image

    paths = ["dog/b.jpg", "dog/a.JPG", "cat/x/y/z.jpg", "cat/x-1/w.jpg", "cat/x/v.jpeg", "cat/u.jpg",
             "a-b/t.jpg", "a-b/notes.txt"]
    for i, p in enumerate(paths):
        path = root / p
        path.parent.mkdir(parents=True, exist_ok=True)
        if p.endswith(".txt"):
            path.write_text("not an image")
        else:
            Image.new("RGB", (6 + i, 5), (40 * i % 256, 0, 0)).save(path, format="JPEG")
    return root


def test_an_image_folder_converts_as_torchvision_reads_it(binary, tmp_path):
    import torchvision

    root = folder(tmp_path / "images")
    want = torchvision.datasets.ImageFolder(str(root))
    for to in ("wds", "tfrecord"):
        out = tmp_path / to
        subprocess.run([binary, "convert", str(root), "--to", to, "--out", str(out), "--shard-samples", "4"],
                       check=True, stdout=subprocess.DEVNULL)
        assert json.loads((out / "classes.json").read_text()) == {"classes": want.classes}
        data = f"wds:{out}/*.tar" if to == "wds" else f"tfrecord:{out}/*.tfrecord"
        image, label = ("jpg", "cls") if to == "wds" else ("image", "label")
        got = []
        with actorfeed.Loader(data, batch_size=1, shuffle=False) as loader:
            for b in loader:
                got.append((bytes(b[image]), int(b[label].ravel()[0])))
        assert got == [(open(p, "rb").read(), c) for p, c in want.samples], to
