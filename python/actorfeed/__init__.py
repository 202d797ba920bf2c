"""actorfeed for Python trainers: a DataLoader-like Loader over actorfeed's
pipeline, run as a child process, whose batches arrive in shared memory
without a copy, resume exactly mid-epoch (also on another number of ranks)
and are sharded by rank. See docs/python.md."""

from ._checkpoint import Checkpoint
from ._feed import BadArgument
from ._loader import Batch, Loader, LoaderError
from ._tokens import write_indexed, write_llmc
from ._writer import ShardWriter, write_shards

__all__ = ["BadArgument", "Batch", "Checkpoint", "Loader", "LoaderError", "ShardWriter", "write_indexed",
           "write_llmc", "write_shards"]
__version__ = "0.1.0"
