"""The operator's constants: users, ports, paths, volume names, plugin names, label values, annotation keys.

Ported from slurm-operator v1.2.1:
  internal/builder/common/const.go (every block), internal/builder/common/builder.go (default-container
  annotation), internal/builder/labels/labels.go (label keys and the app/component values),
  internal/builder/loginbuilder/login_app.go (login, sackd, ssh and sssd constants),
  internal/builder/restapibuilder/restapi_app.go (slurmrestd port and user),
  internal/builder/controllerbuilder/controller_config.go (file names),
  internal/builder/controllerbuilder/controller_app.go (annotationSlurmConfigHash),
  internal/builder/accountingbuilder/accounting_app.go (annotationSlurmdbdConfHash),
  api/v1beta1/well_known.go (prefixes, well-known labels and annotations) and pkg/taints/taints.go.
"""

from __future__ import annotations

# internal/builder/common/const.go: general
SLURM_USER = "slurm"
SLURM_USER_UID = 401
SLURM_USER_GID = SLURM_USER_UID

SLURM_CONFIG_VOLUME = "slurm-config"
SLURM_CONFIG_DIR = "/mnt/slurm"

SLURM_ETC_VOLUME = "slurm-etc"
SLURM_ETC_MOUNT_DIR = "/mnt/etc/slurm"
SLURM_ETC_DIR = "/etc/slurm"

SLURM_PIDFILE_VOLUME = "run"
SLURM_PIDFILE_DIR = "/run"

SLURM_LOGFILE_VOLUME = "slurm-logfile"
SLURM_LOGFILE_DIR = "/var/log/slurm"

SLURM_KEY_FILE = "slurm.key"
AUTH_TYPE = "auth/slurm"
CRED_TYPE = "cred/slurm"
AUTH_INFO = "use_client_ids"

AUTH_ALT_TYPES = "auth/jwt"

JWT_KEY_FILE = "jwt.key"
JWT_KEY_PATH = SLURM_ETC_DIR + "/" + JWT_KEY_FILE
JWT_AUTH_ALT_PARAMETERS = "jwt_key=" + JWT_KEY_PATH

JWKS_KEY_FILE = "jwks.json"
JWKS_KEY_PATH = SLURM_ETC_DIR + "/" + JWKS_KEY_FILE
JWKS_AUTH_ALT_PARAMETERS = "jwks=" + JWKS_KEY_PATH

DEV_NULL = "/dev/null"

SLURM_LIVEZ = "/livez"
SLURM_READYZ = "/readyz"

# internal/builder/common/const.go: worker
SLURMD_PORT = 6818
SSH_PORT = 22
SLURMD_USER = "root"
SLURMD_LOGFILE = "slurmd.log"
SLURMD_LOGFILE_PATH = SLURM_LOGFILE_DIR + "/" + SLURMD_LOGFILE
SLURMD_SPOOL_DIR = "/var/spool/slurmd"

# internal/builder/common/const.go: controller
SLURMCTLD_PORT = 6817
SLURMCTLD_LOGFILE = "slurmctld.log"
SLURMCTLD_LOGFILE_PATH = SLURM_LOGFILE_DIR + "/" + SLURMCTLD_LOGFILE
SLURM_AUTH_SOCKET_VOLUME = "slurm-authsocket"
SLURMCTLD_AUTH_SOCKET_DIR = "/run/slurmctld"
SLURMCTLD_STATESAVE_VOLUME = "statesave"
SLURMCTLD_SPOOL_DIR = "/var/spool/slurmctld"

# internal/builder/common/const.go: accounting
SLURMDBD_PORT = 6819
SLURMDBD_CONF_FILE = "slurmdbd.conf"

# internal/builder/controllerbuilder/controller_config.go
SLURM_CONF_FILE = "slurm.conf"
CGROUP_CONF_FILE = "cgroup.conf"

# internal/builder/restapibuilder/restapi_app.go
SLURMRESTD_PORT = 6820
SLURMRESTD_USER = "nobody"
SLURMRESTD_USER_UID = 65534
SLURMRESTD_USER_GID = SLURMRESTD_USER_UID

# internal/builder/loginbuilder/login_app.go
LOGIN_PORT = 22
SACKD_VOLUME = "sackd-dir"
SACKD_DIR = "/run/slurm"
SACKD_SOCKET = "sack.socket"
SACKD_SOCKET_PATH = SACKD_DIR + "/" + SACKD_SOCKET
SSH_DIR = "/etc/ssh"
SSH_CONFIG_VOLUME = "ssh-config"
SSHD_CONFIG_FILE = "sshd_config"
SSHD_CONFIG_FILE_PATH = SSH_DIR + "/" + SSHD_CONFIG_FILE
SSH_HOST_KEYS_VOLUME = "ssh-host-keys"
SSH_HOST_RSA_KEY_FILE = "ssh_host_rsa_key"
SSH_HOST_ED25519_KEY_FILE = "ssh_host_ed25519_key"
SSH_HOST_ECDSA_KEY_FILE = "ssh_host_ecdsa_key"
SSSD_CONF_VOLUME = "sssd-conf"
SSSD_CONF_FILE = "sssd.conf"
SSSD_CONF_DIR = "/etc/sssd"
SSSD_CONF_FILE_PATH = SSSD_CONF_DIR + "/" + SSSD_CONF_FILE
AUTHORIZED_KEYS_VOLUME = "authorized-keys"
AUTHORIZED_KEYS_FILE = "authorized_keys"
ROOT_AUTHORIZED_KEYS_FILE_PATH = "/root/.ssh/" + AUTHORIZED_KEYS_FILE

# internal/builder/labels/labels.go
APP_LABEL = "app.kubernetes.io/name"
INSTANCE_LABEL = "app.kubernetes.io/instance"
COMPONENT_LABEL = "app.kubernetes.io/component"
PART_OF_LABEL = "app.kubernetes.io/part-of"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
CLUSTER_LABEL = "slinky.slurm.net/cluster"

CONTROLLER_APP = "slurmctld"
CONTROLLER_COMP = "controller"
RESTAPI_APP = "slurmrestd"
RESTAPI_COMP = "restapi"
ACCOUNTING_APP = "slurmdbd"
ACCOUNTING_COMP = "accounting"
WORKER_APP = "slurmd"
WORKER_COMP = "worker"
LOGIN_APP = "login"
LOGIN_COMP = "login"

# api/v1beta1/well_known.go
SLINKY_PREFIX = "slinky.slurm.net/"
NODESET_PREFIX = "nodeset." + SLINKY_PREFIX
LOGINSET_PREFIX = "loginset." + SLINKY_PREFIX
TOPOLOGY_PREFIX = "topology." + SLINKY_PREFIX
ANNOTATION_POD_CORDON = NODESET_PREFIX + "pod-cordon"
ANNOTATION_POD_DELETION_COST = NODESET_PREFIX + "pod-deletion-cost"
ANNOTATION_POD_DEADLINE = NODESET_PREFIX + "pod-deadline"
ANNOTATION_NODE_CORDON_REASON = NODESET_PREFIX + "node-cordon-reason"
ANNOTATION_NODE_TOPOLOGY_SPEC = TOPOLOGY_PREFIX + "spec"
ANNOTATION_NODE_HOSTNAME_OVERRIDE = NODESET_PREFIX + "hostname-override"
LABEL_NODESET_POD_NAME = NODESET_PREFIX + "pod-name"
LABEL_NODESET_POD_INDEX = NODESET_PREFIX + "pod-index"
LABEL_NODESET_POD_HOSTNAME = NODESET_PREFIX + "pod-hostname"
LABEL_NODESET_POD_PROTECT = NODESET_PREFIX + "pod-protect"
LABEL_NODESET_SCALING_MODE = NODESET_PREFIX + "scaling-mode"

SCALING_MODE_STATEFULSET = "StatefulSet"  # api/v1beta1/nodeset_types.go ScalingModeStatefulset (the default)
SCALING_MODE_DAEMONSET = "DaemonSet"  # api/v1beta1/nodeset_types.go ScalingModeDaemonset

# internal/builder/common/const.go: hash annotations; controller_app.go and accounting_app.go add one each
ANNOTATION_AUTH_SLURM_KEY_HASH = SLINKY_PREFIX + "slurm-key-hash"
ANNOTATION_AUTH_JWT_KEY_HASH = SLINKY_PREFIX + "jwt-key-hash"
ANNOTATION_SSHD_CONF_HASH = SLINKY_PREFIX + "sshd-conf-hash"
ANNOTATION_SSSD_CONF_HASH = SLINKY_PREFIX + "sssd-conf-hash"
ANNOTATION_SSH_HOST_KEYS_HASH = SLINKY_PREFIX + "ssh-host-keys-hash"
ANNOTATION_SLURM_CONFIG_HASH = SLINKY_PREFIX + "slurm-config-hash"
ANNOTATION_SLURMDBD_CONF_HASH = SLINKY_PREFIX + "slurmdbd-conf-hash"

# internal/builder/common/builder.go (and each builder's builder.go)
ANNOTATION_DEFAULT_CONTAINER = "kubectl.kubernetes.io/default-container"

# pkg/taints/taints.go TolerationWorkerNode
TAINT_KEY_WORKER_NODE = NODESET_PREFIX + "worker"
TOLERATION_WORKER_NODE = {"key": TAINT_KEY_WORKER_NODE, "operator": "Equal", "effect": "NoExecute"}

# internal/defaults/*.go
DEFAULT_CONTROLLER_PERSISTENCE_ENABLED = True
DEFAULT_ACCOUNTING_STORAGE_PORT = 3306
DEFAULT_ACCOUNTING_STORAGE_DB = "slurm_acct_db"
DEFAULT_NODESET_REPLICAS = 1
DEFAULT_LOGINSET_REPLICAS = 1
DEFAULT_RESTAPI_REPLICAS = 1

# Kubernetes labels the StatefulSet controller sets on its pods (k8s.io/api apps/v1 types.go
# StatefulSetPodNameLabel, PodIndexLabel; set in kubernetes pkg/controller/statefulset/stateful_set_utils.go
# updateIdentity).
STATEFULSET_POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"
