"""The XID numbers the NVIDIA driver logs, and the site's health policy for them.

:data:`XID_NAMES` is every error number of the driver's own header (NVIDIA/open-gpu-kernel-
modules, src/common/sdk/nvidia/inc/nverror.h at 595.45.04, the ``#define``s up to
ROBUST_CHANNEL_LAST_ERROR = 176), and 1-12, which the header no longer defines but the
catalog still lists (8 ROBUST_CHANNEL_FIFO_ERROR_IDLE_TIMEOUT, "GPU stopped processing",
applies to A100 and H100): a policy naming another number names nothing the driver logs.

:data:`DEFAULT_XID_POLICY` is what the node health check, `gpuinfra check --dmesg` and the
GpuFatalXid alert do with an XID, from NVIDIA's Xid catalog
(https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html, column "Resolution
Bucket (Immediate Action)", rows read 2026-11; also docs/hardware-reference.md 8.6): "drain"
where the row asks for a GPU reset, a node reboot or service (48 WORKFLOW_XID_48, 64
RESET_GPU, 74 WORKFLOW_NVLINK_ERR, 79 RESTART_BM, 95 RESET_GPU, 119 and 120 RESET_GPU, 140
RESET_GPU); "warn" where it says IGNORE or RESTART_APP (63 row remapping event: the remap waits
for a reset, which GpuMemoryNeedsReset and the remapped-rows check say; 92 high single-bit ECC
rate; 94 contained ECC error: the application is restarted, the GPU keeps working). Any other
XID warns. A site changes a row with ``health_xid_policy`` (roles/health/defaults.py).
Xid 154 is no row of its own: it says what another XID needs (its recovery action, judged
whatever the policy: gpuinfra.monitoring.gpumetrics.judge_xids).
"""

from __future__ import annotations

from collections.abc import Mapping

ACTIONS = ("drain", "warn")
RECOVERY_ACTION_XID = 154
OLDER_LAST = 12  # the catalog's rows below nverror.h's first number (13)

XID_NAMES: dict[int, str] = {
    13: "ROBUST_CHANNEL_GR_EXCEPTION",
    14: "ROBUST_CHANNEL_FAKE_ERROR",
    16: "ROBUST_CHANNEL_VBLANK_CALLBACK_TIMEOUT",
    19: "ROBUST_CHANNEL_DISP_MISSED_NOTIFIER",
    20: "ROBUST_CHANNEL_MPEG_ERROR_SW_METHOD",
    21: "ROBUST_CHANNEL_ME_ERROR_SW_METHOD",
    22: "ROBUST_CHANNEL_VP_ERROR_SW_METHOD",
    23: "ROBUST_CHANNEL_RC_LOGGING_ENABLED",
    27: "ROBUST_CHANNEL_VP_ERROR",
    28: "ROBUST_CHANNEL_VP2_ERROR",
    29: "ROBUST_CHANNEL_BSP_ERROR",
    30: "ROBUST_CHANNEL_UNUSED_ERROR_30",
    31: "ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT",
    32: "ROBUST_CHANNEL_PBDMA_ERROR",
    33: "ROBUST_CHANNEL_SEC_ERROR",
    34: "ROBUST_CHANNEL_MSVLD_ERROR",
    35: "ROBUST_CHANNEL_MSPDEC_ERROR",
    36: "ROBUST_CHANNEL_MSPPP_ERROR",
    39: "ROBUST_CHANNEL_CE0_ERROR",
    40: "ROBUST_CHANNEL_CE1_ERROR",
    41: "ROBUST_CHANNEL_CE2_ERROR",
    42: "ROBUST_CHANNEL_VIC_ERROR",
    43: "ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR",
    44: "ROBUST_CHANNEL_GR_FAULT_DURING_CTXSW",
    45: "ROBUST_CHANNEL_PREEMPTIVE_REMOVAL",
    47: "ROBUST_CHANNEL_NVENC0_ERROR",
    48: "ROBUST_CHANNEL_GPU_ECC_DBE",
    58: "FB_MEMORY_ERROR",
    59: "PMU_ERROR",
    60: "ROBUST_CHANNEL_SEC2_ERROR",
    61: "PMU_BREAKPOINT",
    62: "PMU_HALT_ERROR",
    63: "INFOROM_PAGE_RETIREMENT_EVENT",
    64: "INFOROM_PAGE_RETIREMENT_FAILURE",
    65: "ROBUST_CHANNEL_NVENC1_ERROR",
    68: "ROBUST_CHANNEL_NVDEC0_ERROR",
    69: "ROBUST_CHANNEL_GR_CLASS_ERROR",
    70: "ROBUST_CHANNEL_CE3_ERROR",
    71: "ROBUST_CHANNEL_CE4_ERROR",
    72: "ROBUST_CHANNEL_CE5_ERROR",
    73: "ROBUST_CHANNEL_NVENC2_ERROR",
    74: "NVLINK_ERROR",
    75: "ROBUST_CHANNEL_CE6_ERROR",
    76: "ROBUST_CHANNEL_CE7_ERROR",
    77: "ROBUST_CHANNEL_CE8_ERROR",
    78: "VGPU_START_ERROR",
    79: "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS",
    80: "PBDMA_PUSHBUFFER_CRC_MISMATCH",
    81: "ROBUST_CHANNEL_VGA_SUBSYSTEM_ERROR",
    82: "ROBUST_CHANNEL_NVJPG0_ERROR",
    83: "ROBUST_CHANNEL_NVDEC1_ERROR",
    84: "ROBUST_CHANNEL_NVDEC2_ERROR",
    85: "ROBUST_CHANNEL_CE9_ERROR",
    86: "ROBUST_CHANNEL_OFA0_ERROR",
    87: "NVTELEMETRY_DRIVER_REPORT",
    88: "ROBUST_CHANNEL_NVDEC3_ERROR",
    89: "ROBUST_CHANNEL_NVDEC4_ERROR",
    90: "LTC_ERROR",
    91: "RESERVED_XID",
    92: "EXCESSIVE_SBE_INTERRUPTS",
    93: "INFOROM_ERASE_LIMIT_EXCEEDED",
    94: "ROBUST_CHANNEL_CONTAINED_ERROR",
    95: "ROBUST_CHANNEL_UNCONTAINED_ERROR",
    96: "ROBUST_CHANNEL_NVDEC5_ERROR",
    97: "ROBUST_CHANNEL_NVDEC6_ERROR",
    98: "ROBUST_CHANNEL_NVDEC7_ERROR",
    99: "ROBUST_CHANNEL_NVJPG1_ERROR",
    100: "ROBUST_CHANNEL_NVJPG2_ERROR",
    101: "ROBUST_CHANNEL_NVJPG3_ERROR",
    102: "ROBUST_CHANNEL_NVJPG4_ERROR",
    103: "ROBUST_CHANNEL_NVJPG5_ERROR",
    104: "ROBUST_CHANNEL_NVJPG6_ERROR",
    105: "ROBUST_CHANNEL_NVJPG7_ERROR",
    108: "NVLINK_REMOTE_TRANSLATION_ERROR",
    110: "SEC_FAULT_ERROR",
    119: "GSP_RPC_TIMEOUT",
    120: "GSP_ERROR",
    121: "C2C_ERROR",
    122: "SPI_PMU_RPC_READ_FAIL",
    123: "SPI_PMU_RPC_WRITE_FAIL",
    124: "SPI_PMU_RPC_ERASE_FAIL",
    125: "INFOROM_FS_ERROR",
    126: "ROBUST_CHANNEL_CE10_ERROR",
    127: "ROBUST_CHANNEL_CE11_ERROR",
    128: "ROBUST_CHANNEL_CE12_ERROR",
    129: "ROBUST_CHANNEL_CE13_ERROR",
    130: "ROBUST_CHANNEL_CE14_ERROR",
    131: "ROBUST_CHANNEL_CE15_ERROR",
    132: "ROBUST_CHANNEL_CE16_ERROR",
    133: "ROBUST_CHANNEL_CE17_ERROR",
    134: "ROBUST_CHANNEL_CE18_ERROR",
    135: "ROBUST_CHANNEL_CE19_ERROR",
    136: "ALI_TRAINING_FAIL",
    137: "NVLINK_PRIV_ERR",
    138: "ROBUST_CHANNEL_DLA_ERROR",
    139: "ROBUST_CHANNEL_OFA1_ERROR",
    140: "UNRECOVERABLE_ECC_ERROR_ESCAPE",
    141: "ROBUST_CHANNEL_FAST_PATH_ERROR",
    142: "ROBUST_CHANNEL_NVENC3_ERROR",
    143: "GPU_INIT_ERROR",
    144: "NVLINK_SAW_ERROR",
    145: "NVLINK_RLW_ERROR",
    146: "NVLINK_TLW_ERROR",
    147: "NVLINK_TREX_ERROR",
    148: "NVLINK_NVLPW_CTRL_ERROR",
    149: "NVLINK_NETIR_ERROR",
    150: "NVLINK_MSE_ERROR",
    151: "ROBUST_CHANNEL_KEY_ROTATION_ERROR",
    152: "RESERVED7_ERROR",
    153: "RESERVED8_ERROR",
    154: "GPU_RECOVERY_ACTION_CHANGED",
    155: "NVLINK_SW_DEFINED_ERROR",
    156: "RESOURCE_RETIREMENT_EVENT",
    157: "RESOURCE_RETIREMENT_FAILURE",
    158: "GPU_FATAL_TIMEOUT",
    159: "ROBUST_CHANNEL_CHI_NON_DATA_ERROR",
    160: "CHANNEL_RETIREMENT_EVENT",
    161: "CHANNEL_RETIREMENT_FAILURE",
    162: "ISINK_REENGAGED",
    163: "ISINK_DISENGAGED",
    164: "ISINK_LOW_LIFETIME",
    165: "ISINK_ZERO_LIFETIME",
    166: "NVLINK_SECURE_NVLE_ERROR",
    167: "PCIE_FATAL_TIMEOUT",
    168: "REDUCED_GPU_MEMORY_CAPACITY",
    169: "SEC2_HALT_ERROR",
    170: "NVLINK_SECURE_ERROR",
    171: "UNCORRECTABLE_DRAM_ERROR",
    172: "UNCORRECTABLE_SRAM_ERROR",
    173: "C2C_FATAL_LINK_FAILURE",
    174: "ROBUST_CHANNEL_RESETCHANNEL_KILL_PROCESS_SILENT",
    175: "MEMORY_SUBSYSTEM_ERROR",
    176: "PCIE_CORRECTABLE_ERROR_FAULT",
}

DEFAULT_XID_POLICY: dict[int, str] = {
    48: "drain", 64: "drain", 74: "drain", 79: "drain", 95: "drain", 119: "drain",
    120: "drain", 140: "drain", 63: "warn", 92: "warn", 94: "warn",
}


def known(number: int) -> bool:
    """Whether the driver logs XID ``number`` (nverror.h's, or the catalog's older 1-12)."""
    return number in XID_NAMES or 1 <= number <= OLDER_LAST


def policy(overrides: Mapping[int, str] | None = None) -> dict[int, str]:
    """The site's policy: the defaults with ``overrides`` (health_xid_policy) over them."""
    return {**DEFAULT_XID_POLICY, **{int(k): v for k, v in (overrides or {}).items()}}


def drain_xids(overrides: Mapping[int, str] | None = None) -> tuple[int, ...]:
    """The XIDs that drain (fail the health check), in order."""
    return tuple(sorted(x for x, action in policy(overrides).items() if action == "drain"))


def policy_problem(value: object) -> str | None:
    """Why ``value`` is no health_xid_policy (a mapping of XID number to "drain" or "warn");
    None when it is one."""
    if not isinstance(value, Mapping):
        return "must be a mapping of XID number to 'drain' or 'warn', e.g. {94: 'drain'}"
    for key, action in value.items():
        if isinstance(key, bool) or not isinstance(key, int):
            return f"key {key!r}: an XID number (an int), e.g. 94"
        if key == RECOVERY_ACTION_XID:
            return ("Xid 154 is no error of its own: it says what another XID needs (its "
                    "recovery action, which always drains); set the XID before it instead")
        if not known(key):
            near = sorted(XID_NAMES, key=lambda n: abs(n - key))[:3]
            return (f"Xid {key} is not an error the NVIDIA driver logs (nverror.h, 1-176; "
                    f"nearest: {', '.join(f'{n} {XID_NAMES[n]}' for n in near)})")
        if action not in ACTIONS:
            return f"Xid {key}: {action!r}: 'drain' or 'warn'"
    return None


# What drains without a site policy: the node check's, check --dmesg's and the alert's default.
DEFAULT_DRAIN_XIDS = drain_xids()
