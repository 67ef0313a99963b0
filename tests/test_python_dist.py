"""One rank of tests/test_python_dist.sh, under `python -m torch.distributed.run --nproc_per_node 2`
(gloo): dpmem.torch with DDP, Opacus's DPDDP and FSDP2. Each rank trains, checks its own figures and
compares its parameters with a single-process run of the same logical batch made here; the shell
script then reads the two ranks' logs with the tools.

    test_python_dist.py OUT_DIR [ddp|ddp-nowait|dpddp|dpddp-ghost|fsdp ...]   (all by default, one launch)

ddp-nowait: DDP with track(comm_wait=False) (the all-reduce overlapped, its scope the launch alone);
dpddp-ghost: Opacus's ghost clipping (DistributedDPOptimizerFastGradientClipping) under DPDDP.

Every mode: dpmem.open(OUT/<mode>.log) opens OUT/<mode>.rank<R>.log; META comm.* written by track();
params_hash() agrees across the ranks (it raises otherwise)."""
import gc
import sys

import torch
import torch.distributed as dist

import dpmem
import dpmem.torch as dt

OUT, MODES = sys.argv[1], sys.argv[2:] or ["ddp", "ddp-nowait", "dpddp", "dpddp-ghost", "fsdp"]
MODE = None
STEPS, L, IN, HID, OUT_F = 3, 8, 6, 12, 3        # L: the logical batch, split over the ranks


def fail(msg):
    print("FAIL: rank %d: %s: %s" % (dist.get_rank(), MODE, msg), flush=True)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def data():
    g = torch.Generator().manual_seed(1)
    return torch.randn(L, IN, generator=g), torch.randint(0, OUT_F, (L,), generator=g)


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(IN, HID), torch.nn.Tanh(), torch.nn.Linear(HID, OUT_F))


def close_to(a, b, what, rel=1e-6):
    """Parameters equal up to the summation order: |a-b| <= rel * max|b| per tensor."""
    worst = 0.0
    for (name, x), (_, y) in zip(a, b):
        err, scale = (x - y).abs().max().item(), y.abs().max().item()
        check(err <= rel * scale, "%s: %s differs from the single-process run by %.3g (scale %.3g)" % (what, name, err, scale))
        worst = max(worst, err / scale)
    if dist.get_rank() == 0:
        print("%s: parameters vs one process: max |diff| / max |param| = %.3g (bound %.0e)" % (what, worst, rel), flush=True)


def params(m):
    return [(n, (p.full_tensor() if type(p).__name__ == "DTensor" else p).detach().clone())
            for n, p in m.named_parameters()]


def plain_reference():
    """One process, the whole logical batch, mean loss: what DDP and FSDP2 must give."""
    m = model()
    opt = torch.optim.SGD(m.parameters(), lr=0.5)
    x, y = data()
    for _ in range(STEPS):
        torch.nn.functional.cross_entropy(m(x), y).backward()
        opt.step()
        opt.zero_grad()
    return params(m)


def train(tracker, m, opt, batches):
    for x, y in batches:
        with tracker.step():
            loss = tracker.criterion(m(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()


def shard(rank, world):
    x, y = data()
    b = L // world
    return x[rank * b:(rank + 1) * b], y[rank * b:(rank + 1) * b]


def run_ddp(rank, world, wait=True):
    ddp = torch.nn.parallel.DistributedDataParallel(model())
    opt = torch.optim.SGD(ddp.parameters(), lr=0.5)
    tracker = dt.track(ddp, opt, criterion=torch.nn.functional.cross_entropy, comm_wait=wait)
    check(dt.tagged(ddp.module[0].weight) == "params/0.weight", "DDP's module. prefix left in the names: %s"
          % dt.tagged(ddp.module[0].weight))
    train(tracker, ddp, opt, [shard(rank, world)] * STEPS)
    # the bucket: every gradient, fp32, one bucket at this size (DDP's first bucket holds up to 1 MiB)
    nbytes = sum(p.numel() * 4 for p in ddp.parameters())
    check(dpmem.peak_bytes("comm") == nbytes, "comm peak %d, want the bucket's %d" % (dpmem.peak_bytes("comm"), nbytes))
    close_to(params(ddp.module), plain_reference(), "DDP" if wait else "DDP (comm_wait=False)")
    return ddp


def run_dpddp(rank, world, mode="hooks"):
    from opacus import PrivacyEngine
    from opacus.distributed import DifferentiallyPrivateDistributedDataParallel as DPDDP
    from torch.utils.data import DataLoader, TensorDataset
    from torch.utils.data.distributed import DistributedSampler

    def private(m, loader, sigma=1.0):
        """(model, optimizer, loader, criterion) from make_private, in hooks or ghost mode."""
        opt = torch.optim.SGD(m.parameters(), lr=0.5)
        # the same noise seed on every rank and in the reference; Opacus's rank 0 alone adds noise
        r = PrivacyEngine().make_private(module=m, optimizer=opt, data_loader=loader, noise_multiplier=sigma,
                                         max_grad_norm=0.1, poisson_sampling=False, grad_sample_mode=mode,
                                         criterion=torch.nn.CrossEntropyLoss(),
                                         noise_generator=torch.Generator().manual_seed(7))
        return (r[0], r[1], r[3], r[2]) if mode == "ghost" else r + (torch.nn.CrossEntropyLoss(),)

    ds = TensorDataset(*data())
    sampler = DistributedSampler(ds, num_replicas=world, rank=rank, shuffle=False)
    m, opt, loader, crit = private(DPDDP(model()), DataLoader(ds, batch_size=L // world, sampler=sampler))
    want = "DistributedDPOptimizer" + ("FastGradientClipping" if mode == "ghost" else "")
    check(type(opt).__name__ == want, "make_private gave %s, want %s" % (type(opt).__name__, want))
    check(opt.expected_batch_size == L // world, "expected batch %s" % opt.expected_batch_size)
    tracker = dt.track(m, opt, criterion=crit)
    check(dt.tagged(m._module.module[2].bias) == "params/2.bias", "names: %s" % dt.tagged(m._module.module[2].bias))
    train(tracker, m, opt, [b for _ in range(STEPS) for b in loader])
    def reference(sigma):
        """One process, the whole batch, the same noise (rank 0's generator, seed 7)."""
        r, ropt, rloader, rcrit = private(model(), DataLoader(ds, batch_size=L), sigma)
        want = "DPOptimizer" + ("FastGradientClipping" if mode == "ghost" else "")
        check(type(ropt).__name__ == want, "reference optimizer %s, want %s" % (type(ropt).__name__, want))
        for _ in range(STEPS):
            for x, y in rloader:
                rcrit(r(x), y).backward()
                ropt.step()
                ropt.zero_grad()
        return params(r._module)
    mine = params(m._module.module)
    what = "DPDDP" + (" ghost" if mode == "ghost" else "")
    close_to(mine, reference(1.0), what)
    # the noise is in both, once: without it (or with it twice) the parameters are far from these
    gap = max((a - b).abs().max().item() for (_, a), (_, b) in zip(mine, reference(0.0)))
    check(gap > 0.01, "%s is within %.3g of the noiseless run: no noise added?" % (what, gap))
    if rank == 0:
        print("%s: max |diff| from the run without noise: %.3g" % (what, gap), flush=True)
    return m


def run_fsdp(rank, world):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    mesh = init_device_mesh("cpu", (world,))
    m = model()
    for layer in (m[0], m[2]):
        fully_shard(layer, mesh=mesh)
    fully_shard(m, mesh=mesh)
    opt = torch.optim.SGD(m.parameters(), lr=0.5)
    tracker = dt.track(m, opt, criterion=torch.nn.functional.cross_entropy)
    # this rank's shard of each parameter (rows split over the ranks, the first ranks take the
    # remainder), each in FSDP2's storage, padded to the largest shard
    local = sum({p.to_local().untyped_storage().data_ptr(): p.to_local().untyped_storage().nbytes()
                 for p in m.parameters()}.values())
    check(dpmem.live_bytes("params") == local, "params %d, want this rank's shards' %d" % (dpmem.live_bytes("params"), local))
    # by hand: FSDP2 cuts dim 0 in 2: layer 0, 6 of 12 rows (36 + 6 floats); layer 2, 2 of 3 rows
    # (24 + 2 floats), rank 1's single row padded to 2: 68 floats = 272 B on each rank (of 123 floats)
    check(local == 272, "this rank's padded shards hold %d B, want 272" % local)
    train(tracker, m, opt, [shard(rank, world)] * STEPS)
    close_to(params(m), plain_reference(), "FSDP2")
    return m


def main():
    global MODE
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    check(world == 2, "world size %d, want 2" % world)
    for MODE in MODES:
        path = dpmem.open("%s/%s.log" % (OUT, MODE))
        check(path == "%s/%s.rank%d.log" % (OUT, MODE, rank), "opened %s" % path)
        dpmem.meta("run", "torch-" + MODE)
        m = {"ddp": run_ddp, "ddp-nowait": lambda r, w: run_ddp(r, w, wait=False), "dpddp": run_dpddp,
             "dpddp-ghost": lambda r, w: run_dpddp(r, w, "ghost"), "fsdp": run_fsdp}[MODE](rank, world)
        digest = dt.params_hash(m)          # raises when the ranks differ
        print("rank %d: %s: params hash %s" % (rank, MODE, digest), flush=True)
        del m
        gc.collect()    # the previous mode's models (DDP's are in reference cycles) before the next counts
        dpmem.close()
    dist.destroy_process_group()


main()
