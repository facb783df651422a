"""Trains a tiny LGSSM with DistributedDataParallel (gloo, CPU); ``tests/test_training.py`` launches it as

    python -m torch.distributed.run --standalone --nproc_per_node=2 tests/ddp_worker.py OUT_DIR

Each rank saves its start and final parameters and its history to ``OUT_DIR/rank{r}.pt``;
the Trainer's rank 0 writes the run folder ``OUT_DIR/run``.
"""

import sys

import torch
import torch.distributed as dist

from ppl_models.inference.objectives import ExactLikelihood
from ppl_models.inference.training import TrainConfig, Trainer
from ppl_models.lgssm import LinearGaussianSSM


def main(out_dir: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    generator = torch.Generator().manual_seed(0)
    x, _ = LinearGaussianSSM.random(2, 2, generator=generator).sample(26, 8, generator=generator)
    mask = torch.arange(8) < torch.randint(4, 9, (26, 1), generator=generator)
    # the ranks start from different parameters: DistributedDataParallel must broadcast rank 0's
    model = LinearGaussianSSM.random(2, 2, generator=torch.Generator().manual_seed(1 + rank))
    start = {k: v.clone() for k, v in model.state_dict().items()}
    config = TrainConfig(epochs=3, batch_size=4, lr=0.05, progress=False)
    train, valid = (x[:20], mask[:20]), (x[20:], mask[20:])
    trainer = Trainer(ExactLikelihood(model), train, valid, config, run_dir=f"{out_dir}/run")
    history = trainer.fit()
    result = {"start": start, "final": model.state_dict(), "history": history, "world_size": trainer.world_size}
    torch.save(result, f"{out_dir}/rank{rank}.pt")
    # rank 0 writes the run folder after the last collective: wait for it, and drop the DDP wrapper, before
    # tearing gloo down (a rank leaving early has aborted in gloo's teardown on a loaded CI machine)
    del trainer
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
