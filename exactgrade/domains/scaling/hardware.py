"""The hardware the scaling tasks may pose, written once: every range bounded by real parts.

A blind solver follows the prompt, so a chip with 169 TB/s of HBM or a memory tier named "hbm"
slower than an NVMe drive would teach it something false about the world. Every scaling sampler
draws its hardware numbers from the ranges below (``draw_in``), and
tests/domains/scaling/test_scaling_hardware.py checks over generated instances that every
hardware input lies in the range its name maps to
(``INPUT_RANGES``), that chips have a ridge point of a real order, and that named memory tiers
are ordered as ``TIERS`` orders them. The chips of a task stay hypothetical ("chip_a") but
physical: their numbers are those of some real part, or between two.

Figures are vendor datasheet peaks, dense (no 2:4 sparsity), bytes per second one way:
- NVIDIA V100 SXM2: 125 TFLOP/s fp16 tensor, 900 GB/s HBM2, 16/32 GB, NVLink2 300 GB/s both ways.
- NVIDIA A100 SXM: 312 TFLOP/s bf16, 624 TOPS int8, 19.5 TFLOP/s fp32, 1.56-2.04 TB/s, 40/80 GB,
  NVLink3 600 GB/s both ways.
- NVIDIA H100 SXM: 989 TFLOP/s bf16, 1979 TFLOP/s fp8, 67 TFLOP/s fp32, 3.35 TB/s, 80 GB,
  NVLink4 900 GB/s both ways; H200: the same compute, 4.8 TB/s, 141 GB.
- NVIDIA B200: 2.25 PFLOP/s bf16, 4.5 PFLOP/s fp8, 8 TB/s, 192 GB, NVLink5 1.8 TB/s both ways;
  GB200 (per GPU): 2.5 PFLOP/s bf16.
- AMD MI25: 24.6 TFLOP/s fp16, 484 GB/s HBM2 (the slowest HBM counted; its compute is below the
  peak range, so its ridge of about 51 is not); MI210: 181 TFLOP/s, 1.6 TB/s, 64 GB (ridge about
  113, the lowest of the parts of at least 100 TFLOP/s); MI250X: 383 TFLOP/s, 3.2 TB/s, 128 GB;
  MI300X: 1307 TFLOP/s bf16, 2615 TFLOP/s fp8, 163 TFLOP/s fp32, 5.3 TB/s, 192 GB; MI325X: 6 TB/s,
  256 GB. NVIDIA B300 and AMD MI355X: 288 GB at 8 TB/s (the largest HBM of one chip).
- HBM per peak FLOP/s (GB per PFLOP/s): TPU v6e 35, v5e 81, H100 81, B200 85, H200 143, MI300X
  147, MI325X 196, v5p 207, A100 40 GB 128 and 80 GB 256, V100 128-256, MI250X 334, MI210 354.
- Reading a chip's whole HBM once takes capacity / bandwidth: V100 16 GB 17.8 ms, TPU v5e 19.5,
  v6e 19.5, H100 23.9, B200 24, A100 40 GB 25.7, H200 29.4, v5p 34, MI300X 36, A100 80 GB 39,
  MI250X 40, MI325X 42.7 ms: every real part lies between 17.8 and 42.7 ms.
- Google TPU v4: 275 TFLOP/s bf16, 1.2 TB/s, 32 GB; v5e: 197 TFLOP/s bf16, 394 TOPS int8,
  819 GB/s, 16 GB, ICI 4 links of 45 GB/s; v5p: 459 TFLOP/s, 2.76 TB/s, 95 GB, ICI 6 links of
  90 GB/s; v6e: 918 TFLOP/s, 1.64 TB/s, 32 GB (ridge about 560, the highest here).
- PCIe x16 per direction: Gen3 15.75 GB/s, Gen4 31.5 GB/s, Gen5 63 GB/s; NVLink-C2C between a
  Grace CPU and its GPU (GH200, GB200): 450 GB/s per direction. NICs: 25 GbE 3.1 GB/s,
  InfiniBand HDR 200 Gb/s 25 GB/s, NDR 400 Gb/s 50 GB/s, XDR / ConnectX-8 800 Gb/s 100 GB/s.
- One NVMe drive: PCIe Gen3 x4 about 3.5 GB/s, Gen5 x4 about 14 GB/s (reads); one 7200 rpm hard
  disk 100-285 MB/s sequential.
- Elementwise work runs on the vector units, not the tensor cores: H100 SXM 134 TFLOP/s fp16 and
  67 TFLOP/s fp32 without tensor cores (989 TFLOP/s bf16 with them), A100 78 / 19.5, MI300X 163
  fp32 vector, V100 31.4 fp16 / 15.7 fp32.
- One server's HBM: DGX-2 16 x V100 32 GB = 512 GB, DGX H100 8 x 80 GB = 640 GB at 26.8 TB/s,
  MI300X platform 8 x 192 GB = 1.5 TB at 42.4 TB/s, DGX B200 8 x 180 GB = 1,440 GB at 64 TB/s
  (NVIDIA's DGX B200 figure; a B200 has 192 GB of HBM3e, 180 GB of it usable in a DGX),
  8 x B300 or MI355X 8 x 288 GB = 2.3 TB at 64 TB/s.
- Host DRAM of one node: 1 TB (DGX A100), 2 TB (DGX H100), 4 TB (DGX B200); 128 GB is a small
  inference host. GPU shared memory per SM: V100 96 KiB, A100 164 KiB, H100 228 KiB.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

from exactgrade.family import Draw, Reject


@dataclass(frozen=True)
class Range:
    """A closed range [low, high] of one hardware quantity and the real parts that bound it."""

    low: int
    high: int
    unit: str
    parts: str

    def __contains__(self, value: object) -> bool:
        return (
            isinstance(value, (int, Fraction))
            and not isinstance(value, bool)
            and self.low <= value <= self.high
        )

    def within(self, low: int | None = None, high: int | None = None) -> Range:
        """The part of this range between low and high (a level's narrower draw)."""
        return Range(
            max(self.low, low if low is not None else self.low),
            min(self.high, high if high is not None else self.high),
            self.unit,
            self.parts,
        )


def _in_steps(draw: Draw, rng: Range, step: int) -> int:
    """A uniform multiple of step in rng (at least one multiple must lie in it)."""
    return step * draw.integer(-(-rng.low // step), rng.high // step)


def draw_in(
    draw: Draw,
    rng: Range,
    step: int,
    round_step: int | None = None,
    round_numbers: bool = False,
    round_high: int | None = None,
) -> int:
    """A value of rng: a multiple of round_step up to round_high when round_numbers (levels 1-2:
    round numbers a model can work with), else a multiple of step anywhere in the range."""
    if round_numbers and round_step is not None:
        return _in_steps(draw, rng.within(high=round_high), round_step)
    return _in_steps(draw, rng, step)


def require(name: str, value: int | Fraction, rng: Range) -> int | Fraction:
    """value, when it lies in rng; else Reject (a hardware number a sampler derived from others,
    e.g. a capacity set between two needs, must still be one a real part has)."""
    if value not in rng:
        raise Reject(f"{name} = {float(value):.4g} {rng.unit} is outside the real range ({rng.parts})")
    return value


TERA, GIGA = 10**12, 10**9

PEAK_FLOPS = Range(
    100 * TERA,
    2500 * TERA,
    "FLOP/s",
    "dense bf16/fp16 matmul peak of one chip: V100 125 T, TPU v5e 197 T ... B200 2.25 P, GB200 2.5 P per GPU",
)
PEAK_FLOPS_8BIT = Range(
    390 * TERA, 5000 * TERA, "FLOP/s", "dense int8/fp8 peak: TPU v5e 394 T, A100 624 T ... B200 4.5 P"
)
PEAK_FLOPS_FP32 = Range(
    15 * TERA, 170 * TERA, "FLOP/s", "fp32 without tensor cores: V100 15.7 T, A100 19.5 T ... MI300X 163 T"
)
ACHIEVED_FLOPS = Range(
    10 * TERA, PEAK_FLOPS.high, "FLOP/s", "FLOP/s a chip sustains: a utilization of 10-100% of a bf16 peak"
)
HBM_BANDWIDTH = Range(
    480 * GIGA,
    8000 * GIGA,
    "bytes/s",
    "HBM of one chip: MI25 484 GB/s, TPU v5e 819 GB/s, A100 2.04 TB/s ... B200 8 TB/s",
)
HBM_CAPACITY = Range(
    16 * GIGA, 192 * GIGA, "bytes", "HBM of one chip: V100 / TPU v5e 16 GB ... B200 / MI300X 192 GB"
)
SERVER_HBM = Range(
    16 * GIGA,
    8 * 288 * GIGA,
    "bytes",
    "HBM of one server in total: one chip of 16 GB ... DGX H100 640 GB ... 8 chips of 288 GB (B300, MI355X)",
)
SERVER_HBM_BANDWIDTH = Range(
    HBM_BANDWIDTH.low,
    8 * HBM_BANDWIDTH.high,
    "bytes/s",
    "HBM bandwidth of one server, its chips' added up: one chip ... DGX H100 26.8 TB/s ... DGX B200 64 TB/s",
)
FULL_READ_MS = Range(
    15,
    50,
    "ms",
    "HBM capacity over HBM bandwidth (one chip or a server of equal chips): real parts 17.8 ms (V100 "
    "16 GB) ... 42.7 ms (MI325X); the range allows about 15% either side",
)
RIDGE = Range(
    110,
    600,
    "FLOP/byte",
    "peak FLOP/s over HBM bytes/s: MI210 about 113 (the lowest of parts of at least 100 TFLOP/s but "
    "NVIDIA's export H20, about 37, left out), "
    "V100 139, A100 153, H100 295, TPU v6e about 560 (the highest part; H100's fp8 peak gives 590)",
)
WHAT_IF_RIDGE = Range(
    110,
    650,
    "FLOP/byte",
    "a what-if chip the prompt names for its scaling of another (sc-028's `chip_a_2.5x_flops`: 625): "
    "up to about 15% beyond the highest real ridge",
)
HBM_PER_PEAK = Range(
    30,
    400,
    "GB per PFLOP/s",
    "HBM capacity over dense bf16 peak of one chip: TPU v6e 35 (32 GB at 918 T), H100 81, B200 85, "
    "H200 143, MI300X 147, A100 80 GB 256, V100 32 GB 256, MI250X 334, MI210 354; about 15% either side",
)
VECTOR_FLOPS = Range(
    15 * TERA,
    170 * TERA,
    "FLOP/s",
    "elementwise (vector-unit, no tensor cores) peak of one chip: V100 15.7 T fp32 ... H100 134 T fp16, "
    "MI300X 163 T fp32",
)
VECTOR_RIDGE = Range(
    8,
    50,
    "FLOP/byte",
    "vector-unit peak over HBM bytes/s: A100 fp32 9.6, V100 fp32 17, MI300X fp32 31, V100 fp16 35, "
    "H100 fp16 40",
)
NVLINK = Range(150 * GIGA, 900 * GIGA, "bytes/s", "NVLink per GPU one way: V100 150 GB/s ... B200 900 GB/s")
ICI = Range(
    45 * GIGA,
    540 * GIGA,
    "bytes/s",
    "TPU inter-chip links per chip one way: one v5e link 45 GB/s ... v5p 6 links of 90 GB/s",
)
TP_LINK = Range(
    ICI.low,
    NVLINK.high,
    "bytes/s",
    "a chip's link inside a tensor-parallel group (a scale-up domain, never a NIC): TPU ICI 45 GB/s ... "
    "NVLink5 900 GB/s",
)
HOST_LINK = Range(
    15 * GIGA,
    450 * GIGA,
    "bytes/s",
    "a chip's link to host memory one way: PCIe Gen3 x16 15.75 GB/s ... NVLink-C2C (GH200, GB200) 450 GB/s",
)
PCIE = Range(15 * GIGA, 64 * GIGA, "bytes/s", "PCIe x16 one way: Gen3 15.75 GB/s ... Gen5 63 GB/s")
NETWORK = Range(
    3 * GIGA,
    100 * GIGA,
    "bytes/s",
    "data-centre network per device: 25 GbE 3.1 GB/s, InfiniBand NDR 50 GB/s ... XDR 100 GB/s",
)
RING_LINK = Range(
    NETWORK.low,
    ICI.high,
    "bytes/s",
    "a device's link in a ring of more than one NVLink domain (72 GPUs): at most a TPU v5p pod's ICI "
    "(6 links of 90 GB/s); NVLink's 900 GB/s ends at the domain",
)
NVLINK_DOMAIN = 72
"""The most GPUs one NVLink domain joins (GB200 NVL72): a ring past it runs on a slower fabric."""
ANY_LINK = Range(
    NETWORK.low, NVLINK.high, "bytes/s", "a device's link of an unnamed kind: from a 25 GbE NIC to NVLink5"
)
NVME = Range(
    2 * GIGA, 14 * GIGA, "bytes/s", "one NVMe drive: PCIe Gen3 x4 about 3.5 GB/s ... Gen5 x4 14 GB/s"
)
HARD_DISK = Range(10**8, 285 * 10**6, "bytes/s", "one 7200 rpm hard disk: 100-285 MB/s sequential")
SHARED_STORAGE = Range(
    GIGA,
    10**13,
    "bytes/s",
    "a cluster's checkpoint writes: one NFS server over 10 GbE ... a parallel file system",
)
HOST_MEMORY = Range(128 * GIGA, 4000 * GIGA, "bytes", "host DRAM of one node: a small host ... DGX B200 4 TB")
SHARED_MEMORY = Range(
    64 * 1024, 256 * 1024, "bytes", "GPU shared memory per SM: V100 96 KiB ... H100 228 KiB"
)

TIERS: tuple[tuple[str, Range], ...] = (
    ("hbm", HBM_BANDWIDTH),
    ("host_dram_over_pcie", PCIE),
    ("nvme_offload", NVME),
    ("hard_disk", HARD_DISK),
)
"""Memory tiers a matmul may stream its operands from, fastest first; the ranges are disjoint, so a
tier's name fixes its place in the order."""

TIER_RANGES: Mapping[str, Range] = dict(TIERS)

INPUT_RANGES: Mapping[str, Range] = {
    "peak_flops": PEAK_FLOPS,
    "achieved_flops": ACHIEVED_FLOPS,
    "vector_flops": VECTOR_FLOPS,
    "achieved_flops_per_chip": ACHIEVED_FLOPS,
    "hbm_bandwidth": HBM_BANDWIDTH,
    "hbm_bytes": HBM_CAPACITY,
    "hbm_bytes_per_chip": HBM_CAPACITY,
    "hbm_bytes_per_device": HBM_CAPACITY,
    "hbm_capacity": HBM_CAPACITY,
    "device_memories": HBM_CAPACITY,
    "link_bandwidth": ANY_LINK,
    "tp_link_bandwidth": NVLINK,
    "intra_bandwidth": NVLINK,
    "dp_link_bandwidth": NETWORK,
    "inter_bandwidth": NETWORK,
    "host_bandwidth": HOST_LINK,
    "checkpoint_write_bandwidth": SHARED_STORAGE,
    "sram_bytes": SHARED_MEMORY,
}
"""The range of each input name that is a hardware number, wherever it appears in a task's inputs
(top level or inside a list of chips, runs or clusters)."""

FAMILY_INPUT_RANGES: Mapping[tuple[str, str], Range] = {
    ("max_batch_for_kv_cache", "hbm_bytes"): SERVER_HBM,
    ("max_batch_for_kv_cache", "hbm_bandwidth"): SERVER_HBM_BANDWIDTH,
    ("tensor_parallel_layer", "link_bandwidth"): TP_LINK,
    ("sharded_decode_latency", "link_bandwidth"): TP_LINK,
}
"""Names whose meaning a family changes: max_batch_for_kv_cache's HBM and its bandwidth are a whole
server's; a tensor-parallel family's link is one inside its tensor-parallel group."""


def input_range(family: str, name: str) -> Range | None:
    """The range of a hardware input of a family, or None when the name is not a hardware number."""
    return FAMILY_INPUT_RANGES.get((family, name), INPUT_RANGES.get(name))


def require_full_read(capacity: int, bandwidth: int) -> None:
    """Reject a capacity and a bandwidth a sampler derived that no real part pairs (full_read_ok)."""
    if not full_read_ok(capacity, bandwidth):
        ms = float(Fraction(capacity * 1000, bandwidth))
        raise Reject(f"reading {capacity} bytes of HBM takes {ms:.4g} ms ({FULL_READ_MS.parts})")


def full_read_ok(capacity: int | Fraction, bandwidth: int | Fraction) -> bool:
    """Whether reading a chip's (or a server's) whole HBM once takes as long as on a real part:
    a capacity and a bandwidth each in range can still pair as no part does (16 GB at 8 TB/s)."""
    return Fraction(capacity * 1000, 1) / bandwidth in FULL_READ_MS


def capacity_per_peak_ok(capacity: int | Fraction, peak_flops: int | Fraction) -> bool:
    """Whether a chip's HBM and its peak FLOP/s pair as on a real part: a capacity and a peak each
    in range can still pair as none does (24 GB at 1.6 PFLOP/s; B200 has 192 GB at 2.25 P)."""
    return Fraction(capacity * 10**6, 1) / peak_flops in HBM_PER_PEAK


def require_capacity_per_peak(capacity: int, peak_flops: int) -> None:
    """Reject an HBM capacity a sampler derived (from a model's needs) that no part of this peak
    holds (capacity_per_peak_ok)."""
    if not capacity_per_peak_ok(capacity, peak_flops):
        per_peak = float(Fraction(capacity * 10**6, peak_flops))
        raise Reject(
            f"{capacity} bytes of HBM at {peak_flops} FLOP/s is {per_peak:.4g} GB per PFLOP/s "
            f"({HBM_PER_PEAK.parts})"
        )


def ridge_ok(peak_flops: int | Fraction, hbm_bandwidth: int | Fraction) -> bool:
    """Whether a chip's ridge point (peak FLOP/s over HBM bytes/s) is of a real order."""
    return Fraction(peak_flops, 1) / hbm_bandwidth in RIDGE


__all__ = [
    "ACHIEVED_FLOPS",
    "ANY_LINK",
    "FAMILY_INPUT_RANGES",
    "FULL_READ_MS",
    "HARD_DISK",
    "HBM_BANDWIDTH",
    "HBM_CAPACITY",
    "HBM_PER_PEAK",
    "HOST_LINK",
    "HOST_MEMORY",
    "ICI",
    "INPUT_RANGES",
    "NETWORK",
    "NVLINK",
    "NVME",
    "PCIE",
    "PEAK_FLOPS",
    "PEAK_FLOPS_8BIT",
    "PEAK_FLOPS_FP32",
    "RING_LINK",
    "NVLINK_DOMAIN",
    "RIDGE",
    "Range",
    "SERVER_HBM",
    "SERVER_HBM_BANDWIDTH",
    "SHARED_MEMORY",
    "SHARED_STORAGE",
    "TIERS",
    "TIER_RANGES",
    "TP_LINK",
    "VECTOR_FLOPS",
    "VECTOR_RIDGE",
    "WHAT_IF_RIDGE",
    "draw_in",
    "full_read_ok",
    "input_range",
    "require",
    "capacity_per_peak_ok",
    "require_capacity_per_peak",
    "require_full_read",
    "ridge_ok",
]
