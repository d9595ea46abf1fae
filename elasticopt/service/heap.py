"""The service's heap and Python's cyclic collector: no full-collection pause inside a request.

Python's cyclic collector walks every object it tracks at a full
(generation-2) collection, which it starts by itself whenever the objects that
survived since the last one reach a quarter of those that survived it.  A
service keeps many: the interpreter's, jax's and the compiled kernels'
(~230,000 once the DP is compiled) and the job cache's translated jobs
(:class:`~elasticopt.service.jobcache.JobCache`: ~170,000-220,000 more when it is full
of a host whose jobs change at every call, as Gavel's do).  Each full
collection then stopped a request for 40-200 ms and found nothing to collect
(Gavel's Figure 9 scale, 4,276 recorded requests: 33 full collections of 42-158
ms, 0 objects collected; Blox's loop before :func:`settle_heap`: 50-120 ms every
few hundred requests).

- :func:`settle_heap` (after the warm-up): collect, then freeze
  (:func:`gc.freeze`) what is alive.
- :class:`FrozenHeap` (after every response, :meth:`FrozenHeap.settle`, which
  both transports call once the response is sent): collect the young
  generations (what the request made and dropped in cycles: 0.15 ms median),
  then freeze what survived.  A frozen object is still freed when its last
  reference goes (reference counting); only a cycle that becomes garbage after
  it was frozen would stay, so the heap is bounded: once the interpreter's
  allocated blocks have grown past twice what they were after the last full
  collection (and by at least :data:`FULL_AFTER_BLOCKS`), a full collection
  runs then, between requests.
  On the Gavel recording above, three passes (12,828 requests): the frozen
  heap stayed at 519,000-543,000 objects, a full collection at the end found
  no cycle, no request met a full collection (max after the first call 55.7
  and 54.6 ms in two passes, against 219.8 and 243.4 ms before;
  ``benchmarks/bench_service_replay.py FILE --calls``).
"""

from __future__ import annotations

import gc
import logging
import sys
import threading
import time

__all__ = ["FULL_AFTER_BLOCKS", "FrozenHeap", "settle_heap"]

log = logging.getLogger("elasticopt.service")

#: The least growth of the allocated memory blocks since the last full collection that starts another one
#: (pymalloc's blocks of at most 512 bytes: at most 512 MB, ~64 MB of typical objects).
FULL_AFTER_BLOCKS = 1_000_000


def settle_heap() -> None:
    """Collect, then freeze (:func:`gc.freeze`) what is alive: the interpreter's, jax's and the compiled
    kernels' objects leave the cyclic collector's view.  Called at the end of
    :meth:`~elasticopt.service.AllocationService.warm_up` and, with ``--no-warm-up``, once the service is
    built."""
    gc.collect()
    gc.freeze()


class FrozenHeap:
    """Keeps a service's heap frozen between requests (see the module docstring).

    Attributes
    ----------
    floor
        The interpreter's allocated memory blocks (:func:`sys.getallocatedblocks`) after the last full
        collection.
    full_collections
        Full collections :meth:`settle` ran (the allocated blocks had doubled).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.floor = sys.getallocatedblocks()
        self.full_collections = 0

    def collect_all(self) -> None:
        """:func:`settle_heap`, and the blocks allocated then are the new floor (after the warm-up)."""
        with self._lock:
            settle_heap()
            self.floor = sys.getallocatedblocks()

    def settle(self) -> None:
        """After a response: collect the young generations, freeze what survived; a full collection when the
        interpreter's allocated blocks have passed ``max(2 * floor, floor + FULL_AFTER_BLOCKS)``.

        The heap is measured by its allocated blocks (0.05 ms), not by the frozen objects: counting those
        walks them (``gc.get_freeze_count``: 50-60 ms at 600,000 objects, as long as a full collection)."""
        with self._lock:
            gc.collect(1)
            gc.freeze()
            blocks = sys.getallocatedblocks()
            if blocks <= max(2 * self.floor, self.floor + FULL_AFTER_BLOCKS):
                return
            t0 = time.perf_counter()
            gc.unfreeze()
            found = gc.collect()
            gc.freeze()
            self.floor = sys.getallocatedblocks()
            self.full_collections += 1
            log.info("allocated blocks %d -> %d: a full collection between requests (%.0f ms, %d found)",
                     blocks, self.floor, 1e3 * (time.perf_counter() - t0), found)
