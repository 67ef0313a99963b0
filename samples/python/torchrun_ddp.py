#!/usr/bin/env python3
"""torchrun_ddp.py — dpmem.torch under torchrun: a small MLP trained on N ranks (gloo on the CPU)
with torch's DDP, Opacus's DPDDP (DP-SGD, σ = 1) or FSDP2 (fully_shard), each rank writing its own log.

    .venv/bin/python -m torch.distributed.run --standalone --nproc_per_node 2 \\
        samples/python/torchrun_ddp.py --mode dpddp --dpmem-log results/torchrun.log
    # -> results/torchrun.rank0.log, results/torchrun.rank1.log
    build/dpmem-report results/torchrun.rank0.log results/torchrun.rank1.log

What the ranks do is what a user's script does: init_process_group, dpmem.open (each rank's own
log), wrap the model, dpmem.torch.track, the loop in tracker.step(), and at the end
dpmem.torch.params_hash() (META comm.params_hash; it raises when the ranks' parameters differ)."""
import argparse
import os
import sys

import torch
import torch.distributed as dist

HERE = os.path.dirname(os.path.abspath(__file__))
try:
    import dpmem  # noqa: F401  (pip install ./python)
except ImportError:
    sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))   # the checkout's, on build/python
import dpmem  # noqa: E402
import dpmem.torch as dtorch  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mode", default="ddp", choices=["ddp", "dpddp", "fsdp"])
    p.add_argument("--dpmem-log", default="results/torchrun.log", help="each rank writes DPMEM_LOG with .rank<R> before its extension")
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=64, help="the logical batch, split over the ranks")
    p.add_argument("--width", type=int, default=256)
    a = p.parse_args()

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    if a.batch_size % world:
        sys.exit("error: --batch-size %d does not divide over %d ranks" % (a.batch_size, world))
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, a.width), torch.nn.ReLU(), torch.nn.Linear(a.width, 10))
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(a.batch_size, 32, generator=g), torch.randint(0, 10, (a.batch_size,), generator=g)
    data = torch.utils.data.TensorDataset(x, y)
    sampler = torch.utils.data.distributed.DistributedSampler(data, shuffle=False)
    loader = torch.utils.data.DataLoader(data, batch_size=a.batch_size // world, sampler=sampler)

    if a.mode == "ddp":
        model = torch.nn.parallel.DistributedDataParallel(model)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
    elif a.mode == "dpddp":
        from opacus import PrivacyEngine
        from opacus.distributed import DifferentiallyPrivateDistributedDataParallel as DPDDP
        model, opt, loader = PrivacyEngine().make_private(
            module=DPDDP(model), optimizer=torch.optim.SGD(model.parameters(), lr=0.1), data_loader=loader,
            noise_multiplier=1.0, max_grad_norm=1.0, poisson_sampling=False)
    else:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard
        mesh = init_device_mesh("cpu", (world,))
        for layer in (model[0], model[2]):
            fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)

    # the log from here (the timeline starts with training, not with importing Opacus); before track(),
    # which writes META comm.* and tags the parameters into it
    os.makedirs(os.path.dirname(a.dpmem_log) or ".", exist_ok=True)
    path = dpmem.open(a.dpmem_log)                  # results/torchrun.rank<R>.log
    dpmem.meta("run", "torchrun-" + a.mode)         # the same on every rank: the tools group the ranks by it
    tracker = dtorch.track(model, opt, criterion=torch.nn.functional.cross_entropy)
    for _ in range(a.steps):
        for xb, yb in loader:
            with tracker.step():
                loss = tracker.criterion(model(xb), yb)
                loss.backward()
                opt.step()
                opt.zero_grad()
    digest = dtorch.params_hash(model)
    if rank == 0:
        print("%d ranks (%s, %s) hold identical parameters (hash %s); rank 0's peak %d B in %s .. %s"
              % (world, a.mode, dist.get_backend(), digest, dpmem.peak_bytes(), path, dpmem.rank_path(a.dpmem_log, world - 1)))
    dpmem.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
