AddressV1 = "{[ p=\"primary\"; a=\"127.0.0.1\"; port=36185; n=\"Internet\"; alias=\"vm\"; ], [ p=\"IPv4\"; a=\"127.0.0.1\"; port=36185; n=\"Internet\"; alias=\"vm\"; ]}"
AuthenticatedIdentity = "condor@family"
AuthenticationMethod = "FAMILY"
CondorPlatform = "$CondorPlatform: X86_64-Debian_12 $"
CondorVersion = "$CondorVersion: 25.14.0 2026-11-24 PRE-RELEASE-UWCS $"
DaemonLastReconfigTime = 1795596618
DaemonStartTime = 1795596618
FlockedJobs = 0
HeldJobs = 0
IdleJobs = 150
JobQueueBirthdate = 1795596618
LastHeardFrom = 1795596620
LocalJobsIdle = 0
LocalJobsRunning = 0
Machine = "vm"
MyAddress = "<127.0.0.1:36185?addrs=127.0.0.1-36185&alias=vm>"
MyCurrentTime = 1795596620
MyType = "Submitter"
Name = "grp.c@negotiator-ext.test"
OCUClaimsBorrowed = 0
OCUClaimsClaimed = 0
OCURunningJobs = 0
OCUWantedJobs = 0
PrivateNetworkName = "vm"
RunningJobs = 0
ScheddIpAddr = "<127.0.0.1:36185?addrs=127.0.0.1-36185&alias=vm>"
ScheddName = "vm"
SchedulerJobsIdle = 0
SchedulerJobsRunning = 0
SubmitterTag = ""
UpdateSequenceNumber = 1
UpdatesHistory = "00000000000000000000000000000000"
UpdatesLost = 0
UpdatesSequenced = 0
UpdatesTotal = 1
WantResAd = true
WeightedIdleJobs = 150
WeightedRunningJobs = 0.0

AddressV1 = "{[ p=\"primary\"; a=\"127.0.0.1\"; port=36185; n=\"Internet\"; alias=\"vm\"; ], [ p=\"IPv4\"; a=\"127.0.0.1\"; port=36185; n=\"Internet\"; alias=\"vm\"; ]}"
AuthenticatedIdentity = "condor@family"
AuthenticationMethod = "FAMILY"
CondorPlatform = "$CondorPlatform: X86_64-Debian_12 $"
CondorVersion = "$CondorVersion: 25.14.0 2026-11-24 PRE-RELEASE-UWCS $"
DaemonLastReconfigTime = 1795596618
DaemonStartTime = 1795596618
FlockedJobs = 0
HeldJobs = 0
IdleJobs = 150
JobQueueBirthdate = 1795596618
LastHeardFrom = 1795596620
LocalJobsIdle = 0
LocalJobsRunning = 0
Machine = "vm"
MyAddress = "<127.0.0.1:36185?addrs=127.0.0.1-36185&alias=vm>"
MyCurrentTime = 1795596620
MyType = "Submitter"
Name = "grp.b@negotiator-ext.test"
OCUClaimsBorrowed = 0
OCUClaimsClaimed = 0
OCURunningJobs = 0
OCUWantedJobs = 0
PrivateNetworkName = "vm"
RunningJobs = 0
ScheddIpAddr = "<127.0.0.1:36185?addrs=127.0.0.1-36185&alias=vm>"
ScheddName = "vm"
SchedulerJobsIdle = 0
SchedulerJobsRunning = 0
SubmitterTag = ""
UpdateSequenceNumber = 1
UpdatesHistory = "00000000000000000000000000000000"
UpdatesLost = 0
UpdatesSequenced = 0
UpdatesTotal = 1
WantResAd = true
WeightedIdleJobs = 150
WeightedRunningJobs = 0.0

AddressV1 = "{[ p=\"primary\"; a=\"127.0.0.1\"; port=36185; n=\"Internet\"; alias=\"vm\"; ], [ p=\"IPv4\"; a=\"127.0.0.1\"; port=36185; n=\"Internet\"; alias=\"vm\"; ]}"
AuthenticatedIdentity = "condor@family"
AuthenticationMethod = "FAMILY"
CondorPlatform = "$CondorPlatform: X86_64-Debian_12 $"
CondorVersion = "$CondorVersion: 25.14.0 2026-11-24 PRE-RELEASE-UWCS $"
DaemonLastReconfigTime = 1795596618
DaemonStartTime = 1795596618
FlockedJobs = 0
HeldJobs = 0
IdleJobs = 10
JobQueueBirthdate = 1795596618
LastHeardFrom = 1795596620
LocalJobsIdle = 0
LocalJobsRunning = 0
Machine = "vm"
MyAddress = "<127.0.0.1:36185?addrs=127.0.0.1-36185&alias=vm>"
MyCurrentTime = 1795596620
MyType = "Submitter"
Name = "grp.a@negotiator-ext.test"
OCUClaimsBorrowed = 0
OCUClaimsClaimed = 0
OCURunningJobs = 0
OCUWantedJobs = 0
PrivateNetworkName = "vm"
RunningJobs = 0
ScheddIpAddr = "<127.0.0.1:36185?addrs=127.0.0.1-36185&alias=vm>"
ScheddName = "vm"
SchedulerJobsIdle = 0
SchedulerJobsRunning = 0
SubmitterTag = ""
UpdateSequenceNumber = 1
UpdatesHistory = "00000000000000000000000000000000"
UpdatesLost = 0
UpdatesSequenced = 0
UpdatesTotal = 1
WantResAd = true
WeightedIdleJobs = 10
WeightedRunningJobs = 0.0

