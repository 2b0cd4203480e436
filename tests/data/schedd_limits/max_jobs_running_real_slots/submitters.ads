AddressV1 = "{[ p=\"primary\"; a=\"127.0.0.1\"; port=33751; n=\"Internet\"; alias=\"vm\"; ], [ p=\"IPv4\"; a=\"127.0.0.1\"; port=33751; n=\"Internet\"; alias=\"vm\"; ]}"
AuthenticatedIdentity = "condor@family"
AuthenticationMethod = "FAMILY"
CondorPlatform = "$CondorPlatform: X86_64-Debian_12 $"
CondorVersion = "$CondorVersion: 25.14.0 2026-11-24 PRE-RELEASE-UWCS $"
DaemonLastReconfigTime = 1795596629
DaemonStartTime = 1795596625
FlockedJobs = 0
HeldJobs = 0
IdleJobs = 150
JobQueueBirthdate = 1795596625
LastHeardFrom = 1795596635
LocalJobsIdle = 0
LocalJobsRunning = 0
Machine = "vm"
MyAddress = "<127.0.0.1:33751?addrs=127.0.0.1-33751&alias=vm>"
MyCurrentTime = 1795596635
MyType = "Submitter"
Name = "grp.c@negotiator-ext.test"
OCUClaimsBorrowed = 0
OCUClaimsClaimed = 0
OCURunningJobs = 0
OCUWantedJobs = 0
PrivateNetworkName = "vm"
RunningJobs = 0
ScheddIpAddr = "<127.0.0.1:33751?addrs=127.0.0.1-33751&alias=vm>"
ScheddName = "vm"
SchedulerJobsIdle = 0
SchedulerJobsRunning = 0
SubmitterTag = ""
UpdateSequenceNumber = 3
UpdatesHistory = "00000000000000000000000000000000"
UpdatesLost = 0
UpdatesSequenced = 2
UpdatesTotal = 3
WantResAd = true
WeightedIdleJobs = 150
WeightedRunningJobs = 0.0

AddressV1 = "{[ p=\"primary\"; a=\"127.0.0.1\"; port=33751; n=\"Internet\"; alias=\"vm\"; ], [ p=\"IPv4\"; a=\"127.0.0.1\"; port=33751; n=\"Internet\"; alias=\"vm\"; ]}"
AuthenticatedIdentity = "condor@family"
AuthenticationMethod = "FAMILY"
CondorPlatform = "$CondorPlatform: X86_64-Debian_12 $"
CondorVersion = "$CondorVersion: 25.14.0 2026-11-24 PRE-RELEASE-UWCS $"
DaemonLastReconfigTime = 1795596629
DaemonStartTime = 1795596625
FlockedJobs = 0
HeldJobs = 0
IdleJobs = 150
JobQueueBirthdate = 1795596625
LastHeardFrom = 1795596635
LocalJobsIdle = 0
LocalJobsRunning = 0
Machine = "vm"
MyAddress = "<127.0.0.1:33751?addrs=127.0.0.1-33751&alias=vm>"
MyCurrentTime = 1795596635
MyType = "Submitter"
Name = "grp.b@negotiator-ext.test"
OCUClaimsBorrowed = 0
OCUClaimsClaimed = 0
OCURunningJobs = 0
OCUWantedJobs = 0
PrivateNetworkName = "vm"
RunningJobs = 0
ScheddIpAddr = "<127.0.0.1:33751?addrs=127.0.0.1-33751&alias=vm>"
ScheddName = "vm"
SchedulerJobsIdle = 0
SchedulerJobsRunning = 0
SubmitterTag = ""
UpdateSequenceNumber = 3
UpdatesHistory = "00000000000000000000000000000000"
UpdatesLost = 0
UpdatesSequenced = 2
UpdatesTotal = 3
WantResAd = true
WeightedIdleJobs = 150
WeightedRunningJobs = 0.0

AddressV1 = "{[ p=\"primary\"; a=\"127.0.0.1\"; port=33751; n=\"Internet\"; alias=\"vm\"; ], [ p=\"IPv4\"; a=\"127.0.0.1\"; port=33751; n=\"Internet\"; alias=\"vm\"; ]}"
AuthenticatedIdentity = "condor@family"
AuthenticationMethod = "FAMILY"
CondorPlatform = "$CondorPlatform: X86_64-Debian_12 $"
CondorVersion = "$CondorVersion: 25.14.0 2026-11-24 PRE-RELEASE-UWCS $"
DaemonLastReconfigTime = 1795596629
DaemonStartTime = 1795596625
FlockedJobs = 0
HeldJobs = 0
IdleJobs = 10
JobQueueBirthdate = 1795596625
LastHeardFrom = 1795596635
LocalJobsIdle = 0
LocalJobsRunning = 0
Machine = "vm"
MyAddress = "<127.0.0.1:33751?addrs=127.0.0.1-33751&alias=vm>"
MyCurrentTime = 1795596635
MyType = "Submitter"
Name = "grp.a@negotiator-ext.test"
OCUClaimsBorrowed = 0
OCUClaimsClaimed = 0
OCURunningJobs = 0
OCUWantedJobs = 0
PrivateNetworkName = "vm"
RunningJobs = 0
ScheddIpAddr = "<127.0.0.1:33751?addrs=127.0.0.1-33751&alias=vm>"
ScheddName = "vm"
SchedulerJobsIdle = 0
SchedulerJobsRunning = 0
SubmitterTag = ""
UpdateSequenceNumber = 3
UpdatesHistory = "00000000000000000000000000000000"
UpdatesLost = 0
UpdatesSequenced = 2
UpdatesTotal = 3
WantResAd = true
WeightedIdleJobs = 10
WeightedRunningJobs = 0.0

