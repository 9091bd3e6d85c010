"""PyTorch through the NCCL ABI: every collective of the torch API, a new_group, a CUDA-graph
captured all-reduce and a short DDP run, on seeded random data; saves every result and every
input so that two runs (stock NCCL, then libnccl.so.2 preloaded) can be compared bit for bit,
and a run whose ranks share a GPU (which stock NCCL refuses) can be checked element by element
against a CPU reference computed from all ranks' inputs.

  torchrun --nproc-per-node N collectives.py run OUT.pt        # N >= 1
  torchrun --nproc-per-node N collectives.py ddp OUT.pt [gloo] # the DDP run alone
  python collectives.py compare A.pt B.pt [KEY_PREFIX]         # exit 1 on any differing bit
  python collectives.py verify OUT.pt                          # exit 1 on any wrong element
  python collectives.py killed                                 # a rank killed mid-loop: the
                                                               # survivor exits naming it in time

Run by scripts/device/nccl-library.sh; which library ran shows in TOPOPLAN_DEBUG=INFO lines.
"""
import os
import sys

import torch
import torch.distributed as dist


# Elements per block of the large exchanges (odd: partial vectors and segments).
BIG = 300007


def uneven(i, j, n):
    """Elements rank i sends to rank j in the uneven all-to-all."""
    return 50021 + 7919 * (i * n + j)


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
    res["in/all_gather"] = x.cpu()
    outs = [torch.empty_like(x) for _ in range(n)]
    dist.all_gather(outs, x)
    res["all_gather"] = torch.stack(outs).cpu()
    big = torch.empty(n * 1031, device=dev)
    dist.all_gather_into_tensor(big, x)
    res["all_gather_into_tensor"] = big.cpu()
    rs, rsin = torch.empty(1031, device=dev), rnd(n * 1031)
    res["in/reduce_scatter_tensor"] = rsin.cpu()
    dist.reduce_scatter_tensor(rs, rsin)
    res["reduce_scatter_tensor"] = rs.cpu()
    b = rnd(777)
    res["in/broadcast"] = b.cpu()
    dist.broadcast(b, src=n - 1)
    res["broadcast"] = b.cpu()
    r = rnd(777)
    res["in/reduce"] = r.cpu()
    dist.reduce(r, dst=0)
    res["reduce"] = r.cpu() if rank == 0 else torch.zeros(0)
    a2a, a2ain = torch.empty(n * 64, device=dev), rnd(n * 64)
    res["in/all_to_all_single"] = a2ain.cpu()
    dist.all_to_all_single(a2a, a2ain)
    res["all_to_all_single"] = a2a.cpu()
    ins = [rnd(65) for _ in range(n)]
    res["in/all_to_all"] = torch.stack(ins).cpu()
    outs = [torch.empty(65, device=dev) for _ in range(n)]
    dist.all_to_all(outs, ins)
    res["all_to_all"] = torch.stack(outs).cpu()
    gin = rnd(129)
    res["in/gather"] = gin.cpu()
    glist = [torch.empty(129, device=dev) for _ in range(n)] if rank == n - 1 else None
    dist.gather(gin, glist, dst=n - 1)
    res["gather"] = torch.stack(glist).cpu() if rank == n - 1 else torch.zeros(0)
    sin = [rnd(97) for _ in range(n)]
    res["in/scatter"] = torch.stack(sin).cpu()
    sout = torch.empty(97, device=dev)
    dist.scatter(sout, sin if rank == 0 else None, src=0)
    res["scatter"] = sout.cpu()
    # batch_isend_irecv's pattern: to the next rank, from the previous, and to itself.
    s, rv = rnd(333), torch.empty(333, device=dev)
    s2, rv2 = rnd(55), torch.empty(55, device=dev)
    res["in/sendrecv"], res["in/sendrecv_self"] = s.cpu(), s2.cpu()
    ops = [dist.P2POp(dist.isend, s, (rank + 1) % n), dist.P2POp(dist.irecv, rv, (rank - 1) % n)]
    ops += [dist.P2POp(dist.isend, s2, rank), dist.P2POp(dist.irecv, rv2, rank)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    res["sendrecv"], res["sendrecv_self"] = rv.cpu(), rv2.cpu()
    # PreMulSum (FSDP's gradient scaling): a host scalar, a device scalar, and a reduce-scatter.
    for name, factor in (("premul_quarter", 0.25), ("premul_third", 1.0 / 3.0)):
        t = rnd(4099)
        res[f"in/{name}"] = t.cpu()
        dist.all_reduce(t, op=dist._make_nccl_premul_sum(factor))
        res[name] = t.cpu()
    t = rnd(4099)
    res["in/premul_device"] = t.cpu()
    dist.all_reduce(t, op=dist._make_nccl_premul_sum(torch.tensor([0.75], device=dev)))
    res["premul_device"] = t.cpu()
    # float32: PyTorch 2.11 hands a bfloat16 PreMulSum a scalar NCCL reads as 0 (stock NCCL and
    # this library alike return zeros), so the reduce-scatter is checked in float32.
    prs_in, prs = rnd(n * 1031), torch.empty(1031, device=dev)
    res["in/premul_rs"] = prs_in.cpu()
    dist.reduce_scatter_tensor(prs, prs_in, op=dist._make_nccl_premul_sum(0.5))
    res["premul_rs"] = prs.cpu()
    # Large and uneven exchanges: several segments, slots and CTAs per message.
    big_in, big_out = rnd(n * BIG), torch.empty(n * BIG, device=dev)
    res["in/a2a_big"] = big_in.cpu()
    dist.all_to_all_single(big_out, big_in)
    res["a2a_big"] = big_out.cpu()
    vin = [rnd(uneven(rank, j, n)) for j in range(n)]
    res["in/a2a_uneven"] = torch.cat(vin).cpu()
    vout = [torch.empty(uneven(j, rank, n), device=dev) for j in range(n)]
    dist.all_to_all(vout, vin)
    res["a2a_uneven"] = torch.cat(vout).cpu()
    bs, br = rnd(BIG + 1), torch.empty(BIG + 1, device=dev)
    res["in/sendrecv_big"] = bs.cpu()
    ops = [dist.P2POp(dist.irecv, br, (rank + 1) % n), dist.P2POp(dist.isend, bs, (rank - 1) % n)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    res["sendrecv_big"] = br.cpu()
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
    # An all-to-all captured the same way (point-to-point kernels, no host work).
    ga_in, ga_out = rnd(n * 4099), torch.empty(n * 4099, device=dev)
    res["in/graph_a2a"] = ga_in.cpu()
    with torch.cuda.stream(side):
        dist.all_to_all_single(ga_out, ga_in)
    torch.cuda.current_stream().wait_stream(side)
    ga_out.zero_()
    graph2 = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph2):
        dist.all_to_all_single(ga_out, ga_in)
    graph2.replay()
    torch.cuda.synchronize()
    res["graph_a2a"] = ga_out.cpu()
    res.update(ddp_run(dev, rnd))
    torch.save(res, f"{out}.rank{rank}")
    dist.destroy_process_group()
    print(f"rank {rank}: {len(res)} results saved")


def ddp_run(dev, rnd):
    """A short DDP run (bucketed gradient all-reduce in bf16): the loss and the flattened
    parameters after every step."""
    res = {}
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
        res[f"ddp_params/{step}"] = torch.cat([p.detach().flatten().float() for p in model.parameters()]).cpu()
    res["ddp_losses"] = torch.stack(losses)
    return res


def ddp_only(out, backend):
    dist.init_process_group(backend)
    rank = dist.get_rank()
    dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)) % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    g = torch.Generator(device="cpu").manual_seed(99 + rank)

    def rnd(*shape, dtype=torch.float32):
        return torch.randn(*shape, generator=g).to(dtype).to(dev)

    torch.save(ddp_run(dev, rnd), f"{out}.rank{rank}")
    dist.destroy_process_group()
    print(f"rank {rank}: ddp saved ({backend})")


def verify(out):
    """Every result of a run against a reference computed on the CPU from every rank's saved
    inputs: data movement exact, sums within float rounding, and the DDP parameters identical
    on every rank after every step."""
    import glob

    files = sorted(glob.glob(f"{out}.rank*"), key=lambda f: int(f.rsplit("rank", 1)[1]))
    rs = [torch.load(f) for f in files]
    n, bad = len(rs), 0

    def expect(rank, key, want, exact=True):
        nonlocal bad
        got = rs[rank][key]
        ok = torch.equal(got, want) if exact else torch.allclose(got, want, rtol=1e-5, atol=1e-5)
        if not ok:
            bad += 1
            print(f"WRONG rank {rank} {key}: max diff {(got.double() - want.double()).abs().max().item()}")

    ag = torch.stack([r["in/all_gather"] for r in rs])
    rsin = torch.stack([r["in/reduce_scatter_tensor"] for r in rs]).sum(0)
    for k in range(n):
        expect(k, "all_gather", ag)
        expect(k, "all_gather_into_tensor", ag.flatten())
        expect(k, "reduce_scatter_tensor", rsin[k * 1031:(k + 1) * 1031], exact=False)
        expect(k, "broadcast", rs[n - 1]["in/broadcast"])
        a2a = [r["in/all_to_all_single"].view(n, 64)[k] for r in rs]
        expect(k, "all_to_all_single", torch.cat(a2a))
        expect(k, "all_to_all", torch.stack([r["in/all_to_all"][k] for r in rs]))
        expect(k, "scatter", rs[0]["in/scatter"][k])
        expect(k, "sendrecv", rs[(k - 1) % n]["in/sendrecv"])
        for name, factor in (("premul_quarter", 0.25), ("premul_third", 1.0 / 3.0), ("premul_device", 0.75)):
            want = torch.stack([r[f"in/{name}"] * factor for r in rs]).sum(0)
            expect(k, name, want, exact=False)
        prs = torch.stack([r["in/premul_rs"] * 0.5 for r in rs]).sum(0)[k * 1031:(k + 1) * 1031]
        if n == 1:
            # PyTorch 2.11 runs a one-rank reduce-scatter as a copy and never calls NCCL, so
            # the factor is not applied (stock NCCL's result is the same, compared bit for bit).
            prs = rs[0]["in/premul_rs"]
        expect(k, "premul_rs", prs, exact=False)
        expect(k, "a2a_big", torch.cat([r["in/a2a_big"].view(n, BIG)[k] for r in rs]))
        blocks = []
        for j in range(n):
            at = sum(uneven(j, m, n) for m in range(k))
            blocks.append(rs[j]["in/a2a_uneven"][at:at + uneven(j, k, n)])
        expect(k, "a2a_uneven", torch.cat(blocks))
        expect(k, "sendrecv_big", rs[(k + 1) % n]["in/sendrecv_big"])
        expect(k, "graph_a2a", torch.cat([r["in/graph_a2a"].view(n, 4099)[k] for r in rs]))
        expect(k, "sendrecv_self", rs[k]["in/sendrecv_self"])
        for step in range(20):
            expect(k, f"ddp_params/{step}", rs[0][f"ddp_params/{step}"])
    expect(0, "reduce", torch.stack([r["in/reduce"] for r in rs]).sum(0), exact=False)
    expect(n - 1, "gather", torch.stack([r["in/gather"] for r in rs]))
    print(f"{n} ranks verified" if bad == 0 else f"VERIFY FAIL ({bad} wrong)")
    print("VERIFY PASS" if bad == 0 else "VERIFY FAIL")
    return 1 if bad else 0


def compare(a, b, prefix=""):
    import glob

    bad, files = 0, sorted(glob.glob(f"{a}.rank*"))
    for fa in files:
        ra, rb = torch.load(fa), torch.load(b + fa[len(a):])
        for k in sorted(k for k in set(ra) | set(rb) if k.startswith(prefix)):
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


def killed_worker():
    """A rank of `killed`: all-reduces in a loop; rank 1 kills itself with SIGKILL after 20."""
    import signal

    dist.init_process_group("nccl")
    rank = dist.get_rank()
    torch.cuda.set_device(0)
    t = torch.ones(1 << 20, device="cuda")
    for i in range(100000):
        if rank == 1 and i == 20:
            print("rank 1: killing itself", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        dist.all_reduce(t)
        torch.cuda.synchronize()
    print(f"rank {rank}: the loop ended without an error", flush=True)


def skip_worker():
    """A rank of the hang-report check (torchrun world 2 sharing GPU 0): ten all-reduces, of
    which rank 1 skips the fifth, so rank 0's last one waits for a call rank 1 never makes;
    rank 1 then idles, as a rank lost in other work would. Rank 0's report must name rank 1
    as behind within TOPOPLAN_HANG_REPORT."""
    import time

    dist.init_process_group("nccl")
    rank = dist.get_rank()
    torch.cuda.set_device(0)
    t = torch.ones(1 << 16, device="cuda")
    for i in range(10):
        if rank == 1 and i == 4:
            continue
        dist.all_reduce(t)
    print(f"rank {rank}: all-reduces enqueued at {time.time():.1f}", flush=True)
    if rank == 1:
        torch.cuda.synchronize()
        time.sleep(45)
        os._exit(0)
    start = time.time()
    torch.cuda.synchronize()
    # The GPU wait ends only at TOPOPLAN_TIMEOUT; PyTorch's watchdog then reports the error.
    print(f"rank 0: the stream drained after {time.time() - start:.1f} s", flush=True)


def killed():
    """World 2 sharing GPU 0, started without torchrun (which would stop the survivor itself):
    rank 1 dies inside a loop of all-reduces; rank 0 must raise an error naming rank 1 within
    TOPOPLAN_TIMEOUT + 5 s of the kill, and exit (PyTorch's watchdog then tears the process
    down on its own schedule, which is reported, not judged)."""
    import subprocess
    import time

    limit = float(os.environ.get("TOPOPLAN_TIMEOUT", "20").rstrip("s")) + 5
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT="29533", WORLD_SIZE="2")
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "killed-worker"],
            env=dict(env, RANK=str(r), LOCAL_RANK=str(r)),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for r in range(2)
    ]
    import threading

    lines = []  # (seconds since start, line) of the survivor's output

    def read():
        for line in procs[0].stdout:
            lines.append((time.monotonic(), line.rstrip()))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    procs[1].wait(timeout=300)
    killed_at = time.monotonic()
    try:
        procs[0].wait(timeout=limit + 90)
    except subprocess.TimeoutExpired:
        procs[0].kill()
        procs[0].wait()
    reader.join(timeout=10)
    exited = time.monotonic() - killed_at
    named = ("gone", "exited", "timed out")
    raised = next((t - killed_at for t, l in lines if "rank 1" in l and any(w in l for w in named)), None)
    for t, l in lines[-40:]:
        print(f"{t - killed_at:+7.1f}s {l[:300]}")
    ok = procs[0].returncode != 0 and raised is not None and raised <= limit
    print(f"survivor: error naming rank 1 after {raised} s (limit {limit:.0f} s), exit {procs[0].returncode} after {exited:.1f} s")
    print("KILLED PASS" if ok else "KILLED FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    if sys.argv[1] == "run":
        run(sys.argv[2])
    elif sys.argv[1] == "ddp":
        ddp_only(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else "nccl")
    elif sys.argv[1] == "killed":
        sys.exit(killed())
    elif sys.argv[1] == "killed-worker":
        killed_worker()
    elif sys.argv[1] == "skip":
        skip_worker()
    elif sys.argv[1] == "verify":
        sys.exit(verify(sys.argv[2]))
    else:
        sys.exit(compare(sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else ""))
