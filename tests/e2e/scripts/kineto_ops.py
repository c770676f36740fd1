"""One call of every collective under torch.profiler, on gloo (run by torchrun): the traces
of tests/unit/ingest/test_kineto.py (tests/data/record.py kineto_traces)."""

import sys

import torch
import torch.distributed as dist
from torch.profiler import ProfilerActivity, profile, tensorboard_trace_handler

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
handler = tensorboard_trace_handler(sys.argv[1], worker_name=f"rank{rank}", use_gzip=True)
with profile(activities=[ProfilerActivity.CPU], record_shapes=True, on_trace_ready=handler):
    dist.all_reduce(torch.ones(1000))
    dist.all_reduce(torch.ones(3, dtype=torch.bfloat16))
    dist.broadcast(torch.ones(10, dtype=torch.float64), 0)
    dist.all_gather([torch.zeros(10) for _ in range(world)], torch.ones(10))
    dist.all_gather_into_tensor(torch.zeros(10 * world), torch.ones(10))
    longs = torch.ones(8 * world, dtype=torch.int64)
    dist.all_to_all_single(torch.zeros_like(longs), longs)
    dist.barrier()
    if rank == 0:
        dist.send(torch.ones(7, dtype=torch.int32), 1)
    else:
        dist.recv(torch.zeros(7, dtype=torch.int32), 0)
    dist.reduce(torch.ones(5), 0)
    dist.gather(torch.ones(4), [torch.zeros(4) for _ in range(world)] if rank == 0 else None, dst=0)
    dist.all_reduce(torch.ones(50), async_op=True).wait()
dist.destroy_process_group()
