"""The structure of pytorch/examples' imagenet/main.py (BSD-3-Clause), reduced to what
matters here, written for scalescope's tests (the upstream file is not copied).

As upstream: the process group is initialised on every rank (``--dist-url env://``), but
the model is wrapped in DistributedDataParallel only when CUDA is available; on CPU each
rank trains its own replica. The data is torchvision's FakeData (``--dummy``), read through
a DistributedSampler and a DataLoader with ``-j`` workers; the loop computes the loss,
top-1/top-5 accuracy (``.item()``), then ``zero_grad``/``backward``/``step``. Runs until
stopped (upstream trains 90 epochs of 1,281,167 images).
"""

import argparse
import os

import torch
import torch.distributed as dist
import torchvision.datasets as datasets
import torchvision.models as models
import torchvision.transforms as transforms
from torch import nn


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description="imagenet/main.py's structure")
    p.add_argument("-a", "--arch", default="resnet18")
    p.add_argument("-j", "--workers", default=1, type=int)
    p.add_argument("-b", "--batch-size", default=4, type=int)
    p.add_argument("--lr", default=0.1, type=float)
    p.add_argument("--dummy", action="store_true")
    p.add_argument("--image-size", default=224, type=int, help="not upstream: 224 there")
    p.add_argument("--world-size", default=-1, type=int)
    p.add_argument("--rank", default=-1, type=int)
    p.add_argument("--dist-url", default="env://")
    p.add_argument("--dist-backend", default="gloo")
    return p.parse_args()


def accuracy(output: torch.Tensor, target: torch.Tensor, topk=(1,)) -> list:
    maxk = max(topk)
    _, pred = output.topk(maxk, 1, True, True)
    correct = pred.t().eq(target.view(1, -1).expand_as(pred.t()))
    return [correct[:k].reshape(-1).float().sum() * 100.0 / target.size(0) for k in topk]


def main() -> None:
    args = parse()
    if args.dist_url == "env://" and args.world_size == -1:
        args.world_size = int(os.environ["WORLD_SIZE"])
    args.distributed = args.world_size > 1
    if args.distributed:
        args.rank = int(os.environ["RANK"])
        dist.init_process_group(args.dist_backend, init_method=args.dist_url,
                                world_size=args.world_size, rank=args.rank)  # fmt: skip
    model = models.__dict__[args.arch](num_classes=10)
    if not torch.cuda.is_available():
        print("using CPU, this will be slow")
    elif args.distributed:
        model.cuda()
        model = nn.parallel.DistributedDataParallel(model)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    criterion = nn.CrossEntropyLoss().to(device)
    optimizer = torch.optim.SGD(model.parameters(), args.lr, momentum=0.9, weight_decay=1e-4)
    size = (3, args.image_size, args.image_size)
    train_dataset = datasets.FakeData(100_000, size, 10, transforms.ToTensor())
    sampler = torch.utils.data.distributed.DistributedSampler(train_dataset)
    loader = torch.utils.data.DataLoader(
        train_dataset, batch_size=args.batch_size, num_workers=args.workers, sampler=sampler
    )
    model.train()
    for images, target in loader:
        images, target = images.to(device), target.to(device)
        output = model(images)
        loss = criterion(output, target)
        accuracy(output, target, topk=(1, 5))
        loss.item()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
