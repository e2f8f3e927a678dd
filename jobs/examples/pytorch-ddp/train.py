#!/usr/bin/env python3
"""PyTorch DistributedDataParallel twin of railyard-train (not run in CI: CI installs no PyTorch).

Launched by Railyard's "env" launcher (or torchrun), which sets RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR and MASTER_PORT; init_process_group("env://") reads them. Trains a one-hidden-layer MLP
on the 8x8 digits vendored in workloads/data/digits.csv.gz and prints MLPerf logging lines
from rank 0, the ones Railyard's agent parses (run_start, eval_accuracy, run_stop with a status).
"""
import argparse
import gzip
import inspect
import json
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_DATA = os.path.join(HERE, "..", "..", "..", "workloads", "data", "digits.csv.gz")


def mllog(event_type, key, value=None, **metadata):
    """One ':::MLLOG' line, as mlperf_logging.mllog prints it (use that package where it is installed)."""
    if int(os.environ.get("RANK", "0")) != 0:
        return
    caller = inspect.stack()[1]
    meta = {"file": os.path.basename(caller.filename), "lineno": caller.lineno, **metadata}
    line = {"namespace": "", "time_ms": int(time.time() * 1000), "event_type": event_type,
            "key": key, "value": value, "metadata": meta}
    print(":::MLLOG " + json.dumps(line), flush=True)


def load_digits(path):
    rows = [list(map(float, line.split(","))) for line in gzip.open(path, "rt") if line.strip()]
    data = torch.tensor(rows)
    x, y = data[:, :-1] / 16.0, data[:, -1].long()
    order = torch.randperm(len(y), generator=torch.Generator().manual_seed(0x5EED))
    cut = len(y) // 5
    return TensorDataset(x[order[cut:]], y[order[cut:]]), TensorDataset(x[order[:cut]], y[order[:cut]])


def evaluate(model, data, device):
    x, y = data.tensors
    with torch.no_grad():
        correct = (model(x.to(device)).argmax(1) == y.to(device)).sum().float()
    return correct.item() / len(y)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--target-accuracy", type=float, default=0.95)
    parser.add_argument("--epochs", type=int, default=40)
    parser.add_argument("--batch-size", type=int, default=32, help="global batch size")
    parser.add_argument("--lr", type=float, default=0.3)
    parser.add_argument("--data", default=DEFAULT_DATA)
    args = parser.parse_args()

    mllog("INTERVAL_START", "init_start")
    use_cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if use_cuda else "gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0"))) if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(device)
    torch.manual_seed(1)
    train, test = load_digits(args.data)
    model = DDP(nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10)).to(device),
                device_ids=[device.index] if use_cuda else None)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    sampler = DistributedSampler(train, num_replicas=world, rank=rank, shuffle=True, seed=1)
    loader = DataLoader(train, batch_size=max(1, args.batch_size // world), sampler=sampler)
    mllog("POINT_IN_TIME", "submission_benchmark", "railyard_digits_mlp", dataset="sklearn-digits")
    mllog("POINT_IN_TIME", "global_batch_size", args.batch_size)
    mllog("INTERVAL_END", "init_stop")

    mllog("INTERVAL_START", "run_start")
    status, epoch = "aborted", 0
    for epoch in range(1, args.epochs + 1):
        mllog("INTERVAL_START", "epoch_start", epoch_num=epoch)
        sampler.set_epoch(epoch)
        start = time.time()
        for x, y in loader:
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(x.to(device)), y.to(device)).backward()  # DDP allreduces here
            optimizer.step()
        mllog("INTERVAL_END", "epoch_stop", epoch_num=epoch)
        mllog("POINT_IN_TIME", "tracked_stats", {"throughput": len(train) / (time.time() - start)}, step=epoch)
        accuracy = evaluate(model.module, test, device)
        mllog("POINT_IN_TIME", "eval_accuracy", accuracy, epoch_num=epoch)
        if accuracy >= args.target_accuracy:
            status = "success"
            break
    mllog("INTERVAL_END", "run_stop", status=status, epoch_num=epoch)
    dist.destroy_process_group()
    return 0 if status == "success" else 4


if __name__ == "__main__":
    raise SystemExit(main())
