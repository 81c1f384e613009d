"""Rules for who uses the cluster (`slurm.identity`, `slurm.accounts`, `slurm.qos`, partitions' `accounts`):
people and groups that exist, an account tree without cycles, QoS that exist, limits the cluster can meet.

Registered in the same registry as the other domains' rules (registry.py), so `run_validators` runs them too.
"""

from __future__ import annotations

from collections.abc import Iterator

from components import catalog
from components.config.cluster import ClusterConfig
from components.config.problems import did_you_mean
from components.config.rules.login import key_findings
from components.config.rules.registry import Found, rule

GPU = "gres/gpu"


@rule("identity-source")
def identity_source(c: ClusterConfig) -> Iterator[Found]:
    identity = c.slurm.identity
    if identity.ldap and (identity.users or identity.groups):
        yield Found("slurm.identity", sorted([*identity.users, *identity.groups]),
                    "users are declared in the stack and also read from LDAP: two sources would hand out "
                    "clashing UIDs", "keep one: the directory (remove users and groups) or the declared users "
                    "(remove ldap)")


@rule("identity-groups")
def identity_groups(c: ClusterConfig) -> Iterator[Found]:
    identity = c.slurm.identity
    for name, person in identity.users.items():
        for i, group in enumerate(person.groups):
            if group not in identity.groups:
                yield Found(f"slurm.identity.users.{name}.groups[{i}]", group, "not a group of slurm.identity.groups",
                            f"{did_you_mean(group, identity.groups)}declare it under slurm.identity.groups "
                            "with its GID")


@rule("identity-ids")
def identity_ids(c: ClusterConfig) -> Iterator[Found]:
    """Two names with one UID (or GID) would own each other's files on /shared."""
    identity = c.slurm.identity
    for kind, ids in (("users", {n: p.uid for n, p in identity.users.items()}), ("groups", identity.groups)):
        seen: dict[int, str] = {}
        for name, number in ids.items():
            if number in seen:
                yield Found(f"slurm.identity.{kind}.{name}", number, f"the same ID as {seen[number]!r}",
                            "give every name its own ID (IDs are what own files on /shared)")
            seen.setdefault(number, name)


@rule("identity-ssh-keys")
def identity_ssh_keys(c: ClusterConfig) -> Iterator[Found]:
    for name, person in c.slurm.identity.users.items():
        yield from key_findings(f"slurm.identity.users.{name}.sshKeys", person.ssh_keys)


@rule("root-login", "warning")
def root_login(c: ClusterConfig) -> Iterator[Found]:
    if c.slurm.login.root_ssh_keys:
        yield Found("slurm.login.rootSshKeys", f"{len(c.slurm.login.root_ssh_keys)} keys",
                    "root may log in to the login pods, and jobs root submits run as root",
                    "log in as yourself (slurm.identity) and remove rootSshKeys, unless break-glass root "
                    "access is what you mean")


@rule("account-parent")
def account_parent(c: ClusterConfig) -> Iterator[Found]:
    accounts = c.slurm.accounts
    for name, account in accounts.items():
        if account.parent is not None and account.parent not in accounts:
            yield Found(f"slurm.accounts.{name}.parent", account.parent, "not an account of slurm.accounts",
                        f"{did_you_mean(account.parent, accounts)}declare the parent, or leave parent out to "
                        "hang the account under Slurm's root")
    reported: set[str] = set()
    for start in accounts:
        chain = [start]
        while (parent := accounts[chain[-1]].parent) in accounts:
            if parent in chain:
                cycle = chain[chain.index(parent):]
                if not reported & set(cycle):
                    reported |= set(cycle)
                    yield Found(f"slurm.accounts.{min(cycle)}.parent", " -> ".join([*cycle, parent]),
                                "the accounts are each other's parents: a tree has no cycles",
                                "hang one of them under another account or under root (no parent)")
                break
            chain.append(parent)


@rule("account-users")
def account_users(c: ClusterConfig) -> Iterator[Found]:
    """In a directory, who exists is the directory's business; declared users must be declared."""
    identity = c.slurm.identity
    if identity.ldap:
        return
    for name, account in c.slurm.accounts.items():
        for i, user in enumerate(account.users):
            if user not in identity.users:
                yield Found(f"slurm.accounts.{name}.users[{i}]", user, "not a user of slurm.identity.users",
                            f"{did_you_mean(user, identity.users)}declare the person under "
                            "slurm.identity.users, or read people from slurm.identity.ldap")


@rule("user-without-account", "warning")
def user_without_account(c: ClusterConfig) -> Iterator[Found]:
    """Accounts switch on AccountingStorageEnforce=associations: a user in no account cannot submit."""
    if not c.slurm.accounts:
        return
    members = {user for account in c.slurm.accounts.values() for user in account.users}
    for name in c.slurm.identity.users:
        if name not in members:
            yield Found(f"slurm.identity.users.{name}", name,
                        "in no Slurm account: Slurm rejects this person's jobs (Invalid account)",
                        "add the name to the users of an account under slurm.accounts")


@rule("account-qos")
def account_qos(c: ClusterConfig) -> Iterator[Found]:
    qos = c.slurm.qos
    for name, account in c.slurm.accounts.items():
        for i, q in enumerate(account.qos):
            if q not in qos:
                yield Found(f"slurm.accounts.{name}.qos[{i}]", q, "not a QoS of slurm.qos",
                            f"{did_you_mean(q, qos)}declare it under slurm.qos")
        if account.default_qos is not None and account.default_qos not in account.qos:
            yield Found(f"slurm.accounts.{name}.defaultQOS", account.default_qos,
                        "the default QoS is not one the account may use", "add it to the account's qos list")


@rule("partition-accounts")
def partition_accounts(c: ClusterConfig) -> Iterator[Found]:
    for pname, partition in c.partitions.items():
        for i, account in enumerate(partition.accounts):
            if account not in c.slurm.accounts:
                yield Found(f"partitions.{pname}.accounts[{i}]", account, "not an account of slurm.accounts",
                            f"{did_you_mean(account, c.slurm.accounts)}declare it under slurm.accounts")


def _reachable_partitions(c: ClusterConfig, account: str) -> list[str]:
    """Partitions an account's jobs may run in: open ones, and closed ones that name it or an ancestor
    (Slurm's AllowAccounts names accounts, not trees, so only the account itself counts)."""
    return [name for name, p in c.partitions.items() if not p.accounts or account in p.accounts]


def _gpus(c: ClusterConfig, partitions: list[str]) -> tuple[int, int]:
    """(GPUs of all these partitions at maxNodes, GPUs of the largest one): what a group of jobs and what a
    single job could ever get."""
    per_partition = [max((catalog.CATALOG[t].accelerators for t in c.partitions[p].instance_types
                          if t in catalog.CATALOG and catalog.CATALOG[t].accelerator == "nvidia"), default=0)
                     * c.partitions[p].max_nodes for p in partitions]
    return sum(per_partition), max(per_partition, default=0)


@rule("gpu-limit-capacity")
def gpu_limit_capacity(c: ClusterConfig) -> Iterator[Found]:
    """A GPU limit above what the partitions can hold never binds: the PR that 'caps team-b at 256 GPUs' on
    a 128-GPU cluster caps nothing, so the reviewer should hear it."""
    users_of = {q: [a for a, acc in c.slurm.accounts.items() if q in acc.qos] for q in c.slurm.qos}
    for qname, q in c.slurm.qos.items():
        reachable = sorted({p for a in users_of[qname] for p in _reachable_partitions(c, a)}) or list(c.partitions)
        total, largest = _gpus(c, reachable)
        for field, limits, cap, what in (("grpTRES", q.grp_tres, total, "all its jobs together"),
                                         ("maxTRESPerUser", q.max_tres_per_user, total, "one user"),
                                         ("maxTRESPerJob", q.max_tres_per_job, largest, "one job")):
            if GPU in limits and limits[GPU] > cap:
                yield Found(f"slurm.qos.{qname}.{field}", f"{GPU}={limits[GPU]}",
                            f"more GPUs than {what} can get: {cap} in partitions {', '.join(reachable)} at "
                            "maxNodes", f"lower it to at most {cap}, or raise the partitions' maxNodes")
    for aname, account in c.slurm.accounts.items():
        total, _ = _gpus(c, _reachable_partitions(c, aname))
        if GPU in account.grp_tres and account.grp_tres[GPU] > total:
            yield Found(f"slurm.accounts.{aname}.grpTRES", f"{GPU}={account.grp_tres[GPU]}",
                        f"more GPUs than the account's partitions hold at maxNodes ({total})",
                        f"lower it to at most {total}, or raise the partitions' maxNodes")
