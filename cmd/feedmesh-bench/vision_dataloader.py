"""The PIL / torch side of `feedmesh-bench vision` (embedded in the binary).

    python3 vision_dataloader.py decode FOLDER IMAGES
    python3 vision_dataloader.py train FOLDER IMAGES SIZE BATCH WORKERS

decode: Image.open(path).convert("RGB") and np.asarray for IMAGES images
of the folder (in ImageFolder's order, from the start again when it runs
out). train: one pass of a torch DataLoader (batch BATCH, WORKERS worker
processes) over torchvision's ImageFolder with RandomResizedCrop(SIZE),
RandomHorizontalFlip, ToTensor and Normalize (ImageNet's mean and std),
IMAGES images (a Subset repeating the folder). Each first does a short
warm-up, then prints one JSON line: images, seconds and cpu_s (user +
system of this process and of the worker processes it reaped) of the
measured pass.
"""

import json
import resource
import sys
import time


def cpu():
    s = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def main():
    mode, folder, images = sys.argv[1], sys.argv[2], int(sys.argv[3])
    import numpy as np
    import torchvision
    from PIL import Image

    ds = torchvision.datasets.ImageFolder(folder)
    paths = [p for p, _ in ds.samples]
    if mode == "decode":
        def run(n):
            s = 0
            for i in range(n):
                with open(paths[i % len(paths)], "rb") as f:
                    a = np.asarray(Image.open(f).convert("RGB"))
                s += a.ndim == 3
            return s
    else:
        import torch
        from torchvision import transforms

        size, batch, workers = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
        ds.transform = transforms.Compose([
            transforms.RandomResizedCrop(size),
            transforms.RandomHorizontalFlip(),
            transforms.ToTensor(),
            transforms.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
        ])

        def run(n):
            sub = torch.utils.data.Subset(ds, [i % len(ds) for i in range(n)])
            dl = torch.utils.data.DataLoader(sub, batch_size=batch, num_workers=workers)
            s = 0
            for x, y in dl:
                s += x.shape[0]
            del dl
            return s
    run(min(images, 64))
    c0, t0 = cpu(), time.perf_counter()
    got = run(images)
    t1, c1 = time.perf_counter(), cpu()
    if got != images:
        sys.exit(f"read {got} images, want {images}")
    print(json.dumps({"images": images, "seconds": t1 - t0, "cpu_s": c1 - c0}))


if __name__ == "__main__":
    main()
