"""The keys each Slurm release's own parsers read and the plugins it ships, by table
(slurm.conf, NodeName and PartitionName lines, cgroup.conf, gres.conf), written by
gpuinfra_lab/slurm_keys.py from SchedMD's tag of each release (SOURCES): the newest
whole (BASE), the others as what they add to it and lack of it. Read by
gpuinfra.slurm.versions (unread_settings). Generated: do not edit by hand."""

from __future__ import annotations

SOURCES = {
    "20.11": "SchedMD/slurm tag slurm-20-11-4-1 (commit d176fa8b61098c0eda2f0d5b7b69ef40c351f568)",
    "21.08": "SchedMD/slurm tag slurm-21-08-5-1 (commit 2558f205627ac62c1a07b451f077fac67bb6a3e9)",
    "22.05": "SchedMD/slurm tag slurm-22-05-8-1 (commit d525b6872a106d32916b33a8738f12510ec7cf04)",
    "23.11": "SchedMD/slurm tag slurm-23-11-4-1 (commit 924dce610761c30937e88ac334bdb3ca90beab91)",
    "24.11": "SchedMD/slurm tag slurm-24-11-5-1 (commit e4788bed70462dc5e14b1b170d271d7495a0f334)",
}
BASE_VERSION = "24.11"
BASE = {
    "slurm.conf": (
        "AccountingStorageBackupHost AccountingStorageEnforce AccountingStorageExternalHost "
        "AccountingStorageHost AccountingStorageLoc AccountingStorageParameters "
        "AccountingStoragePass AccountingStoragePort AccountingStorageTRES "
        "AccountingStorageType AccountingStorageUser AccountingStoreFlags "
        "AccountingStoreJobComment AcctGatherEnergyType AcctGatherFilesystemType "
        "AcctGatherInfinibandType AcctGatherInterconnectType AcctGatherNodeFreq "
        "AcctGatherProfileType AllowSpecResourcesUsage AuthAltParameters AuthAltTypes "
        "AuthInfo AuthType BackupAddr BackupController BatchStartTimeout BcastExclude "
        "BcastParameters BurstBufferParameters BurstBufferType CertmgrParameters CertmgrType "
        "CliFilterPlugins ClusterName CommunicationParameters CompleteWait ControlAddr "
        "ControlMachine CoreSpecPlugin CpuFreqDef CpuFreqGovernors CredType CryptoType "
        "DataParserParameters DebugFlags DefCPUPerGPU DefMemPerCPU DefMemPerGPU DefMemPerNode "
        "DependencyParameters DisableRootJobs DownNodes EioTimeout EnforcePartLimits Epilog "
        "EpilogMsgTime EpilogSlurmctld ExtSensorsFreq ExtSensorsType FairShareDampeningFactor "
        "FastSchedule FederationParameters FirstJobId FrontendName GetEnvTimeout GpuFreqDef "
        "GresTypes GroupUpdateForce GroupUpdateTime HashPlugin HealthCheckInterval "
        "HealthCheckNodeState HealthCheckProgram InactiveLimit InteractiveStepOptions "
        "JobAcctGatherFrequency JobAcctGatherParams JobAcctGatherType JobCompHost JobCompLoc "
        "JobCompParams JobCompPass JobCompPort JobCompType JobCompUser JobContainerType "
        "JobCredentialPrivateKey JobCredentialPublicCertificate JobFileAppend JobRequeue "
        "JobSubmitPlugins KeepAliveTime KillOnBadExit KillWait LaunchParameters LaunchType "
        "Licenses LogTimeFormat MCSParameters MCSPlugin MailDomain MailProg MaxArraySize "
        "MaxBatchRequeue MaxDBDMsgs MaxJobCount MaxJobId MaxMemPerCPU MaxMemPerNode "
        "MaxNodeCount MaxStepCount MaxTasksPerNode MessageTimeout MinJobAge MpiDefault "
        "MpiParams NodeFeaturesPlugins NodeName NodeSet OverTimeLimit PartitionName "
        "PlugStackConfig PluginDir PowerParameters PowerPlugin PrEpParameters PrEpPlugins "
        "PreemptExemptTime PreemptMode PreemptParameters PreemptType PriorityCalcPeriod "
        "PriorityDecayHalfLife PriorityFavorSmall PriorityFlags PriorityMaxAge "
        "PriorityParameters PrioritySiteFactorParameters PrioritySiteFactorPlugin "
        "PriorityType PriorityUsageResetPeriod PriorityWeightAge PriorityWeightAssoc "
        "PriorityWeightFairshare PriorityWeightJobSize PriorityWeightPartition "
        "PriorityWeightQOS PriorityWeightTRES PrivateData ProctrackType Prolog "
        "PrologEpilogTimeout PrologFlags PrologSlurmctld PropagatePrioProcess "
        "PropagateResourceLimits PropagateResourceLimitsExcept RebootProgram ReconfigFlags "
        "RequeueExit RequeueExitHold ResumeFailProgram ResumeProgram ResumeRate ResumeTimeout "
        "ResvEpilog ResvOverRun ResvProlog ReturnToService RoutePlugin SallocDefaultCommand "
        "SbcastParameters SchedulerParameters SchedulerTimeSlice SchedulerType "
        "ScronParameters SelectType SelectTypeParameters SlurmSchedLogFile SlurmSchedLogLevel "
        "SlurmUser SlurmctldAddr SlurmctldDebug SlurmctldHost SlurmctldLogFile "
        "SlurmctldParameters SlurmctldPidFile SlurmctldPort SlurmctldPrimaryOffProg "
        "SlurmctldPrimaryOnProg SlurmctldSyslogDebug SlurmctldTimeout SlurmdDebug "
        "SlurmdLogFile SlurmdParameters SlurmdPidFile SlurmdPort SlurmdSpoolDir "
        "SlurmdSyslogDebug SlurmdTimeout SlurmdUser SrunEpilog SrunPortRange SrunProlog "
        "StateSaveLocation SuspendExcNodes SuspendExcParts SuspendExcStates SuspendProgram "
        "SuspendRate SuspendTime SuspendTimeout SwitchParameters SwitchType TCPTimeout "
        "TLSParameters TLSType TaskEpilog TaskPlugin TaskPluginParam TaskProlog TmpFS "
        "TopologyParam TopologyPlugin TrackWCKey TreeWidth UnkillableStepProgram "
        "UnkillableStepTimeout UsePAM VSizeFactor WaitTime X11Parameters"
    ),
    "NodeName": (
        "BcastAddr Boards CPUSpecList CPUs CoreSpecCount CoresPerSocket CpuBind Feature "
        "Features Gres MemSpecLimit NodeAddr NodeHostname Port Procs RealMemory Reason "
        "RestrictedCoresPerGPU Sockets SocketsPerBoard State TRESWeights ThreadsPerCore "
        "TmpDisk Weight"
    ),
    "PartitionName": (
        "AllocNodes AllowAccounts AllowGroups AllowQos Alternate CpuBind DefCPUPerGPU "
        "DefMemPerCPU DefMemPerGPU DefMemPerNode Default DefaultTime DenyAccounts DenyQos "
        "DisableRootJobs ExclusiveTopo ExclusiveUser GraceTime Hidden LLN MaxCPUsPerNode "
        "MaxCPUsPerSocket MaxMemPerCPU MaxMemPerNode MaxNodes MaxTime MinNodes Nodes "
        "OverSubscribe OverTimeLimit PowerDownOnIdle PreemptMode Priority PriorityJobFactor "
        "PriorityTier QOS ReqResv ResumeTimeout RootOnly SelectTypeParameters Shared State "
        "SuspendTime SuspendTimeout TRESBillingWeights"
    ),
    "cgroup.conf": (
        "AllowedDevicesFile AllowedRAMSpace AllowedSwapSpace CgroupAutomount CgroupMountpoint "
        "CgroupPlugin CgroupReleaseAgentDir ConstrainCores ConstrainDevices ConstrainRAMSpace "
        "ConstrainSwapSpace EnableControllers IgnoreSystemd IgnoreSystemdOnFailure "
        "MaxRAMPercent MaxSwapPercent MemoryLimitEnforcement MemoryLimitThreshold "
        "MemorySwappiness MinRAMSpace SignalChildrenProcesses SystemdTimeout"
    ),
    "gres.conf": (
        "AutoDetect CPUs Cores Count File Files Flags Link Links MultipleFiles Name Type"
    ),
    "plugins": (
        "accounting_storage/ctld_relay accounting_storage/mysql accounting_storage/slurmdbd "
        "auth/jwt auth/munge auth/none auth/slurm cgroup/v1 cgroup/v2 cred/munge cred/none "
        "gres/gpu gres/mps gres/nic gres/shard jobacct_gather/cgroup jobacct_gather/linux "
        "mpi/cray_shasta mpi/pmi2 mpi/pmix proctrack/cgroup proctrack/linuxproc "
        "proctrack/pgid sched/backfill sched/builtin select/cons_tres select/linear "
        "switch/hpe_slingshot switch/nvidia_imex task/affinity task/cgroup topology/3d_torus "
        "topology/block topology/default topology/tree"
    ),
    "none_is_unset": (
        "accounting_storage_type acct_gather_energy_type acct_gather_filesystem_type "
        "acct_gather_interconnect_type acct_gather_profile_type cli_filter_plugins "
        "job_acct_gather_type job_comp_type job_container_plugin mcs_plugin mpi_default "
        "site_factor_plugin switch_type task_plugin topology_plugin"
    ),
}
# version -> table -> (what it reads beyond BASE, what of BASE it lacks)
DIFF = {
    "20.11": {
        "slurm.conf": (
            "CacheGroups CheckpointType DefaultStorageHost DefaultStorageLoc "
            "DefaultStoragePass DefaultStoragePort DefaultStorageType DefaultStorageUser "
            "JobCheckpointDir MemLimitEnforce SchedulerAuth SchedulerPort SchedulerRootFilter "
            "SlurmctldPlugstack",
            "AccountingStoreFlags BcastExclude BcastParameters CertmgrParameters CertmgrType "
            "DataParserParameters HashPlugin MaxBatchRequeue MaxNodeCount PreemptParameters "
            "SuspendExcStates SwitchParameters TLSParameters TLSType",
        ),
        "NodeName": (
            "",
            "RestrictedCoresPerGPU",
        ),
        "PartitionName": (
            "",
            "ExclusiveTopo MaxCPUsPerSocket PowerDownOnIdle ResumeTimeout SuspendTime "
            "SuspendTimeout",
        ),
        "cgroup.conf": (
            "AllowedKmemSpace ConstrainKmemSpace MaxKmemPercent MinKmemSpace TaskAffinity",
            "CgroupPlugin EnableControllers IgnoreSystemd IgnoreSystemdOnFailure "
            "SignalChildrenProcesses SystemdTimeout",
        ),
        "gres.conf": (
            "",
            "",
        ),
        "plugins": (
            "accounting_storage/none gres/mic jobacct_gather/none mpi/none "
            "proctrack/cray_aries sched/hold select/cons_common select/cons_res "
            "select/cray_aries select/other switch/cray_aries switch/none task/cray_aries "
            "task/none topology/hypercube topology/none",
            "accounting_storage/ctld_relay auth/slurm cgroup/v1 cgroup/v2 gres/shard "
            "switch/hpe_slingshot switch/nvidia_imex topology/block topology/default",
        ),
        "none_is_unset": (
            "",
            "accounting_storage_type acct_gather_energy_type acct_gather_filesystem_type "
            "acct_gather_interconnect_type acct_gather_profile_type cli_filter_plugins "
            "job_acct_gather_type job_comp_type job_container_plugin mcs_plugin mpi_default "
            "site_factor_plugin switch_type task_plugin topology_plugin",
        ),
    },
    "21.08": {
        "slurm.conf": (
            "SchedulerAuth SlurmctldPlugstack",
            "CertmgrParameters CertmgrType DataParserParameters HashPlugin MaxBatchRequeue "
            "MaxNodeCount PreemptParameters SuspendExcStates TLSParameters TLSType",
        ),
        "NodeName": (
            "",
            "RestrictedCoresPerGPU",
        ),
        "PartitionName": (
            "",
            "ExclusiveTopo MaxCPUsPerSocket PowerDownOnIdle",
        ),
        "cgroup.conf": (
            "AllowedKmemSpace ConstrainKmemSpace MaxKmemPercent MinKmemSpace TaskAffinity",
            "EnableControllers IgnoreSystemd IgnoreSystemdOnFailure SignalChildrenProcesses "
            "SystemdTimeout",
        ),
        "gres.conf": (
            "",
            "",
        ),
        "plugins": (
            "accounting_storage/none jobacct_gather/none mpi/none proctrack/cray_aries "
            "select/cons_common select/cons_res select/cray_aries select/other "
            "switch/cray_aries switch/none task/cray_aries task/none topology/hypercube "
            "topology/none",
            "accounting_storage/ctld_relay auth/slurm cgroup/v2 gres/shard "
            "switch/hpe_slingshot switch/nvidia_imex topology/block topology/default",
        ),
        "none_is_unset": (
            "",
            "accounting_storage_type acct_gather_energy_type acct_gather_filesystem_type "
            "acct_gather_interconnect_type acct_gather_profile_type cli_filter_plugins "
            "job_acct_gather_type job_comp_type job_container_plugin mcs_plugin mpi_default "
            "site_factor_plugin switch_type task_plugin topology_plugin",
        ),
    },
    "22.05": {
        "slurm.conf": (
            "SchedulerAuth SlurmctldPlugstack",
            "CertmgrParameters CertmgrType DataParserParameters HashPlugin MaxBatchRequeue "
            "PreemptParameters SuspendExcStates TLSParameters TLSType",
        ),
        "NodeName": (
            "",
            "RestrictedCoresPerGPU",
        ),
        "PartitionName": (
            "",
            "ExclusiveTopo MaxCPUsPerSocket PowerDownOnIdle",
        ),
        "cgroup.conf": (
            "AllowedKmemSpace ConstrainKmemSpace MaxKmemPercent MinKmemSpace",
            "EnableControllers SignalChildrenProcesses SystemdTimeout",
        ),
        "gres.conf": (
            "",
            "",
        ),
        "plugins": (
            "accounting_storage/none jobacct_gather/none mpi/none proctrack/cray_aries "
            "select/cons_common select/cons_res select/cray_aries select/other "
            "switch/cray_aries switch/none task/cray_aries task/none topology/hypercube "
            "topology/none",
            "accounting_storage/ctld_relay auth/slurm switch/nvidia_imex topology/block "
            "topology/default",
        ),
        "none_is_unset": (
            "",
            "accounting_storage_type acct_gather_energy_type acct_gather_filesystem_type "
            "acct_gather_interconnect_type acct_gather_profile_type cli_filter_plugins "
            "job_acct_gather_type job_comp_type job_container_plugin mcs_plugin mpi_default "
            "site_factor_plugin switch_type task_plugin topology_plugin",
        ),
    },
    "23.11": {
        "slurm.conf": (
            "SchedulerAuth",
            "CertmgrParameters CertmgrType DataParserParameters HashPlugin TLSParameters "
            "TLSType",
        ),
        "NodeName": (
            "",
            "RestrictedCoresPerGPU",
        ),
        "PartitionName": (
            "",
            "ExclusiveTopo",
        ),
        "cgroup.conf": (
            "",
            "SystemdTimeout",
        ),
        "gres.conf": (
            "",
            "",
        ),
        "plugins": (
            "proctrack/cray_aries select/cray_aries select/other switch/cray_aries "
            "task/cray_aries",
            "accounting_storage/ctld_relay switch/nvidia_imex",
        ),
        "none_is_unset": (
            "core_spec_plugin ext_sensors_type power_plugin",
            "",
        ),
    },
}
