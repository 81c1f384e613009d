"""SSSD's configuration for each identity mode: accepted by the real `sssctl config-check` (Debian's sssd-tools),
and in "ldap" mode run against a real directory (Debian's slapd): sssd resolves a person over StartTLS with the
generated file, serves their SSH key, homes them on /shared, admits only the allowed group, and refuses a server
whose certificate its CA did not sign."""

from __future__ import annotations

import base64
import glob
import os
import socket
import subprocess
from pathlib import Path

import pytest

from components.config.teams import Identity
from components.slinky import identity
from components.slinky.cluster import secret_key
from scripts.offline.plan_model import SECRET, UNKNOWN, known
from tests.conftest import require_tool, unavailable
from tests.slinky.helpers import from_directory, objects, plan_of, variant

pytestmark = pytest.mark.slow  # real sssd daemons: `make test-fast` leaves it out

SSSD_TOOLS = "make system-packages installs it: apt-get install sssd-tools"
BASE = "dc=example,dc=org"
USERS = Identity.model_validate({"groups": {"ml": 30001}, "users": {"alice": {"uid": 20001, "groups": ["ml"]}}})
BIND = {"bindDN": f"cn=reader,{BASE}", "bindPassword": "k8s:ldap/password"}
DIRECTORIES = {
    "ldap-starttls-bind-ca-groups": {"uri": "ldap://ldap.example.org", "baseDN": "dc=example,dc=org", **BIND,
                                     "caCertificate": "k8s:ldap/ca.pem", "allowGroups": ["llm", "vision"]},
    "ldaps-anonymous": {"uri": "ldaps://ldap.example.org:636", "baseDN": "dc=example,dc=org"},
    "active-directory": {"uri": "ldaps://dc1.corp.example.com", "baseDN": "dc=corp,dc=example,dc=com",
                         "schema": "ad", **BIND},
}
MODES = {"none": Identity(), "users": USERS,
         **{name: Identity.model_validate({"ldap": ldap}) for name, ldap in DIRECTORIES.items()}}


def options(text: str) -> dict[str, str]:
    return dict(line.split(" = ", 1) for line in text.splitlines() if " = " in line)


def config_check(tmp_path: Path, text: str) -> subprocess.CompletedProcess[str]:
    """`sssctl config-check` of `text` as the pods have it: root's, mode 0600, no snippets."""
    sssctl = require_tool("sssctl", SSSD_TOOLS)
    if os.geteuid() != 0:
        unavailable("sssctl config-check insists on an sssd.conf owned by root: run as root")
    conf = tmp_path / "sssd.conf"
    conf.write_text(text)
    conf.chmod(0o600)
    (tmp_path / "conf.d").mkdir()
    return subprocess.run([sssctl, "config-check", "-c", str(conf)], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("mode", sorted(MODES))
def test_each_mode_passes_sssctl_config_check(tmp_path: Path, mode: str) -> None:
    result = config_check(tmp_path, identity.sssd_conf(MODES[mode], "a reader's password"))
    assert result.returncode == 0 and "Issues identified by validators: 0" in result.stdout, result.stdout


def test_config_check_catches_a_misspelt_option(tmp_path: Path) -> None:
    text = identity.sssd_conf(MODES["ldaps-anonymous"]).replace("ldap_tls_reqcert", "ldap_tls_reqcerts")
    result = config_check(tmp_path, text)
    assert result.returncode != 0 and "'ldap_tls_reqcerts' is not allowed" in result.stdout


def test_without_a_directory_it_is_slinkys_proxy_over_the_pods_files() -> None:
    for mode in ("none", "users"):
        found = options(identity.sssd_conf(MODES[mode]))
        assert found["id_provider"] == found["auth_provider"] == "proxy" and found["proxy_lib_name"] == "files"
        assert found["filter_users"] == found["filter_groups"] == "root,slurm"


def test_a_directory_is_read_over_verified_tls_only() -> None:
    starttls = options(identity.sssd_conf(MODES["ldap-starttls-bind-ca-groups"], "pw"))
    assert (starttls["ldap_tls_reqcert"], starttls["ldap_id_use_start_tls"]) == ("demand", "true")
    assert starttls["ldap_tls_cacert"] == identity.LDAP_CA_FILE
    assert (starttls["ldap_default_bind_dn"], starttls["ldap_default_authtok"]) == (BIND["bindDN"], "pw")
    assert (starttls["access_provider"], starttls["simple_allow_groups"]) == ("simple", "llm, vision")
    assert starttls["override_homedir"] == "/shared/home/%u" and starttls["services"] == "nss, pam, ssh"
    ldaps = options(identity.sssd_conf(MODES["ldaps-anonymous"]))
    assert ldaps["ldap_tls_reqcert"] == "demand" and "ldap_id_use_start_tls" not in ldaps
    assert "ldap_default_authtok" not in ldaps and ldaps["access_provider"] == "permit"
    assert options(identity.sssd_conf(MODES["active-directory"], "pw"))["ldap_schema"] == "ad"


@pytest.mark.parametrize("password", [None, "two\nlines"])
def test_a_bind_password_must_be_one_line(password: str | None) -> None:
    with pytest.raises(ValueError, match="one line"):
        identity.sssd_conf(MODES["active-directory"], password)


@pytest.mark.parametrize("source", ["k8s:ldap-reader/password",
                                    "arn:aws:secretsmanager:us-west-2:123456789012:secret:ldap-reader-AbCdEf"])
def test_the_offline_plan_shows_a_bind_password_it_cannot_know(tmp_path: Path, source: str) -> None:
    """The password is read when `pulumi up` runs (a Secret read, a Secrets Manager lookup); offline, the mocks
    answer both as unknown instead of making a value up, and the sssd.conf that holds it is unknown too."""
    plan = plan_of(variant("dev", from_directory(bindDN=f"cn=reader,{BASE}", bindPassword=source)),
                   tmp_path)
    secret = objects(plan, "Secret")["slurm-sssd"]
    assert secret["stringData"] == UNKNOWN
    assert "stringData" not in known(secret)  # what offline checks leave to the API server


def test_a_kubernetes_secret_key_is_decoded_or_named_when_missing() -> None:
    data = {"password": base64.b64encode(b"reader's secret").decode()}
    assert secret_key(data, "ldap-reader", "password") == "reader's secret"
    with pytest.raises(ValueError, match="Secret slurm/ldap-reader has no key 'pw'"):
        secret_key(data, "ldap-reader", "pw")


def test_without_secrets_the_planned_sssd_conf_is_known(tmp_path: Path) -> None:
    plan = plan_of(variant("dev", from_directory()), tmp_path)
    assert objects(plan, "Secret")["slurm-sssd"]["stringData"] == {"sssd.conf": SECRET}


# --- against a real directory ----------------------------------------------------------------------------------

SCRIPT = Path(__file__).with_name("sssd_against_slapd.sh")
READER_PASSWORD = "reader's secret"
ALICE_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAliceDirectoryKeyForTheSssdTestOnly000000000 alice@example.org"
# The OpenSSH LPK schema's sshPublicKey and ldapPublicKey (as in jirutka/ssh-ldap-pubkey etc/openssh-lpk.schema),
# which Debian's slapd does not ship.
LPK_SCHEMA = """attributetype ( 1.3.6.1.4.1.24552.500.1.1.1.13 NAME 'sshPublicKey' EQUALITY octetStringMatch
  SYNTAX 1.3.6.1.4.1.1466.115.121.1.40 )
objectclass ( 1.3.6.1.4.1.24552.500.1.1.2.0 NAME 'ldapPublicKey' SUP top AUXILIARY MUST ( sshPublicKey $ uid ) )
"""
# Two posixAccounts: alice (llm, with a key) may log in, bob (vision) may not. Only the reader may read.
DATA = f"""dn: {BASE}
objectClass: dcObject
objectClass: organization
o: example
dc: example

dn: cn=reader,{BASE}
objectClass: organizationalRole
objectClass: simpleSecurityObject
cn: reader
userPassword: {READER_PASSWORD}

dn: ou=people,{BASE}
objectClass: organizationalUnit
ou: people

dn: ou=groups,{BASE}
objectClass: organizationalUnit
ou: groups

dn: uid=alice,ou=people,{BASE}
objectClass: inetOrgPerson
objectClass: posixAccount
objectClass: ldapPublicKey
uid: alice
cn: Alice
sn: A
uidNumber: 20001
gidNumber: 30001
homeDirectory: /home/alice
loginShell: /bin/bash
sshPublicKey: {ALICE_KEY}

dn: uid=bob,ou=people,{BASE}
objectClass: inetOrgPerson
objectClass: posixAccount
uid: bob
cn: Bob
sn: B
uidNumber: 20002
gidNumber: 30002
homeDirectory: /home/bob
loginShell: /bin/bash

dn: cn=llm,ou=groups,{BASE}
objectClass: posixGroup
cn: llm
gidNumber: 30001
memberUid: alice

dn: cn=vision,ou=groups,{BASE}
objectClass: posixGroup
cn: vision
gidNumber: 30002
memberUid: bob
"""


def _slapd_conf(work: Path) -> str:
    return f"""include /etc/ldap/schema/core.schema
include /etc/ldap/schema/cosine.schema
include /etc/ldap/schema/nis.schema
include /etc/ldap/schema/inetorgperson.schema
include {work}/lpk.schema
modulepath /usr/lib/ldap
moduleload back_mdb
pidfile {work}/slapd.pid
argsfile {work}/slapd.args
TLSCACertificateFile {work}/ca.pem
TLSCertificateFile {work}/server.pem
TLSCertificateKeyFile {work}/server.key
database mdb
suffix "{BASE}"
rootdn "cn=admin,{BASE}"
directory {work}/db
access to attrs=userPassword by anonymous auth by * none
access to * by users read by anonymous auth
"""


def _certificate_authority(openssl: str, work: Path, name: str) -> None:
    subprocess.run([openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", str(work / f"{name}.key"), "-out", str(work / f"{name}.pem"), "-days", "2",
                    "-subj", f"/CN={name}"], check=True, capture_output=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def directory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A work directory with slapd's config, its data, a CA that signed the server and one that did not."""
    needed = [("slapd", "slapd"), ("slapadd", "slapd"), ("ldapwhoami", "ldap-utils"), ("sssd", "sssd-common"),
              ("sssctl", "sssd-tools"), ("sss_ssh_authorizedkeys", "sssd-common"), ("openssl", "openssl"),
              ("unshare", "util-linux")]
    tools = {name: require_tool(name, f"make system-packages installs it: apt-get install {package}")
             for name, package in needed}
    if not glob.glob("/usr/lib/*/sssd/libsss_ldap.so"):
        unavailable("sssd's LDAP provider is not installed (make system-packages: apt-get install sssd-ldap)")
    if os.geteuid() != 0:
        unavailable("sssd and slapd run as root in a private mount namespace here: run as root")
    probe = subprocess.run([tools["unshare"], "--mount", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        unavailable(f"no private mount namespace for the test's sssd (unshare --mount: {probe.stderr.strip()}; a "
                    "container needs CAP_SYS_ADMIN): it would otherwise take over the machine's /var/lib/sss")
    work = tmp_path_factory.mktemp("slapd")
    openssl = tools["openssl"]
    _certificate_authority(openssl, work, "ca")
    _certificate_authority(openssl, work, "other-ca")
    (work / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    subprocess.run([openssl, "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", str(work / "server.key"), "-out", str(work / "server.csr"), "-subj", "/CN=127.0.0.1"],
                   check=True, capture_output=True)
    subprocess.run([openssl, "x509", "-req", "-in", str(work / "server.csr"), "-CA", str(work / "ca.pem"),
                    "-CAkey", str(work / "ca.key"), "-CAcreateserial", "-days", "2", "-extfile", str(work / "san.ext"),
                    "-out", str(work / "server.pem")], check=True, capture_output=True)
    (work / "lpk.schema").write_text(LPK_SCHEMA)
    (work / "data.ldif").write_text(DATA)
    (work / "nsswitch.conf").write_text("passwd: files sss\ngroup: files sss\n")
    return work


def against_slapd(directory: Path, tmp_path: Path, ca: str, tries: int) -> str:
    """What sssd answers with the generated sssd.conf (the pod's CA file being `ca`), against a fresh slapd."""
    work = tmp_path / "work"
    subprocess.run(["cp", "-a", str(directory), str(work)], check=True)
    (work / "db").mkdir()
    port = _free_port()
    (work / "slapd.conf").write_text(_slapd_conf(work))
    people = Identity.model_validate({"ldap": {
        "uri": f"ldap://127.0.0.1:{port}", "baseDN": BASE, "bindDN": f"cn=reader,{BASE}",
        "bindPassword": "k8s:ldap/password", "caCertificate": "k8s:ldap/ca.pem", "allowGroups": ["llm"]}})
    (work / "sssd.conf").write_text(identity.sssd_conf(people, READER_PASSWORD))
    (work / "ldap-ca.pem").write_text((work / f"{ca}.pem").read_text())
    result = subprocess.run(["unshare", "--mount", "--propagation", "private", "--pid", "--fork", "sh", str(SCRIPT),
                             str(work), str(port)], env={"PATH": os.environ["PATH"], "SSSD_TRIES": str(tries)},
                            capture_output=True, text=True, timeout=120)
    log = (work / "sssd.log").read_text() if (work / "sssd.log").exists() else ""
    assert result.returncode == 0, f"{result.stderr}\n{log}"
    return result.stdout


def test_a_directory_user_resolves_with_the_generated_config(directory: Path, tmp_path: Path) -> None:
    lines = dict(line.split(": ", 1) for line in against_slapd(directory, tmp_path, "ca", 100).splitlines())
    assert lines["passwd"] == "alice:*:20001:30001:Alice:/shared/home/alice:/bin/bash"  # override_homedir
    assert lines["group"] == "llm:*:30001:alice"
    assert lines["keys"] == ALICE_KEY  # what sshd's AuthorizedKeysCommand gets
    assert (lines["access alice"], lines["access bob"]) == ("Success", "Permission denied")  # simple_allow_groups


def test_a_server_certificate_from_another_ca_is_refused(directory: Path, tmp_path: Path) -> None:
    assert against_slapd(directory, tmp_path, "other-ca", 25).strip() == "unresolved"
