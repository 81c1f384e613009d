"""The TCP ports of the Slurm cluster's pods: one definition for the NetworkPolicies
(components/segmentation/network_policies.py), the services that address them and the deploy check.

Slurm's ports: slurm.conf defaults SlurmctldPort 6817, SlurmdPort 6818, slurmdbd.conf DbdPort 6819; slurmrestd
listens on 6820 (SlinkyProject/slurm-operator v1.2.1 internal/builder/common/const.go, restapibuilder/
restapi_app.go); sshd on the login pods 22; MariaDB 3306. srun listens on SrunPortRange, which our slurm.conf
sets (components/slinky/slurm_conf.py SRUN_PORT_RANGE).
"""

SLURMCTLD, SLURMD, SLURMDBD, SLURMRESTD, SSH, MARIADB = 6817, 6818, 6819, 6820, 22, 3306
