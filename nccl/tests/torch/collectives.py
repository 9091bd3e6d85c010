"""PyTorch through the NCCL ABI: every collective of the torch API, a new_group, a CUDA-graph
captured all-reduce and a short DDP run, on seeded random data; saves every result so that two
runs (stock NCCL, then libnccl.so.2 preloaded) can be compared bit for bit.

  torchrun --nproc-per-node N collectives.py run OUT.pt     # N >= 1
  python collectives.py compare A.pt B.pt                   # exit 1 on any differing bit

Run by scripts/device/nccl-library.sh; which library ran shows in TOPOPLAN_DEBUG=INFO lines.
"""
import os
import sys

import torch
import torch.distributed as dist


def run(out):
    dist.init_process_group("nccl")
    rank, n = dist.get_rank(), dist.get_world_size()
    dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)) % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    g = torch.Generator(device="cpu").manual_seed(1234 + rank)
    res = {}

    def rnd(*shape, dtype=torch.float32):
        return torch.randn(*shape, generator=g).to(dtype).to(dev)

    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        for op in (dist.ReduceOp.SUM, dist.ReduceOp.MAX, dist.ReduceOp.MIN, dist.ReduceOp.AVG):
            t = rnd(4099, dtype=dtype)
            dist.all_reduce(t, op=op)
            res[f"all_reduce/{dtype}/{op}"] = t.cpu()
    x = rnd(1031)
    outs = [torch.empty_like(x) for _ in range(n)]
    dist.all_gather(outs, x)
    res["all_gather"] = torch.stack(outs).cpu()
    big = torch.empty(n * 1031, device=dev)
    dist.all_gather_into_tensor(big, x)
    res["all_gather_into_tensor"] = big.cpu()
    rs = torch.empty(1031, device=dev)
    dist.reduce_scatter_tensor(rs, rnd(n * 1031))
    res["reduce_scatter_tensor"] = rs.cpu()
    b = rnd(777)
    dist.broadcast(b, src=n - 1)
    res["broadcast"] = b.cpu()
    r = rnd(777)
    dist.reduce(r, dst=0)
    res["reduce"] = r.cpu() if rank == 0 else torch.zeros(0)
    a2a = torch.empty(n * 64, device=dev)
    dist.all_to_all_single(a2a, rnd(n * 64))
    res["all_to_all_single"] = a2a.cpu()
    if n > 1:
        s, rv = rnd(333), torch.empty(333, device=dev)
        ops = [dist.P2POp(dist.isend, s, (rank + 1) % n), dist.P2POp(dist.irecv, rv, (rank - 1) % n)]
        for w in dist.batch_isend_irecv(ops):
            w.wait()
        res["sendrecv"] = rv.cpu()
    sub = dist.new_group(list(range(0, n, 2)))
    if rank % 2 == 0:
        t = rnd(100)
        dist.all_reduce(t, group=sub)
        res["new_group"] = t.cpu()
    # CUDA graph capture of an all-reduce, replayed three times.
    static = rnd(4096)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        dist.all_reduce(static)  # warm up outside the capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        dist.all_reduce(static)
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    res["graph_all_reduce"] = static.cpu()
    # A short DDP run: bucketed gradient all-reduce in bf16.
    torch.manual_seed(7)
    model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 256)).to(dev, torch.bfloat16)
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[dev.index], bucket_cap_mb=1)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    losses = []
    for step in range(20):
        xin = rnd(32, 256, dtype=torch.bfloat16)
        loss = ddp(xin).float().pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.detach().cpu())
    res["ddp_losses"] = torch.stack(losses)
    torch.save(res, f"{out}.rank{rank}")
    dist.destroy_process_group()
    print(f"rank {rank}: {len(res)} results saved")


def compare(a, b):
    import glob

    bad, files = 0, sorted(glob.glob(f"{a}.rank*"))
    for fa in files:
        ra, rb = torch.load(fa), torch.load(b + fa[len(a):])
        for k in sorted(set(ra) | set(rb)):
            x, y = ra.get(k), rb.get(k)
            if x is None or y is None or x.shape != y.shape or not torch.equal(x.view(torch.uint8), y.view(torch.uint8)):
                bad += 1
                print(f"DIFFER {fa[len(a):]} {k}")
        print(f"{fa[len(a) + 1:]}: {len(ra)} results compared")
    if not files:
        print(f"no {a}.rank* files")
        bad += 1
    print("COMPARE PASS" if bad == 0 else f"COMPARE FAIL ({bad} differ)")
    return 1 if bad else 0


if __name__ == "__main__":
    if sys.argv[1] == "run":
        run(sys.argv[2])
    else:
        sys.exit(compare(sys.argv[2], sys.argv[3]))
