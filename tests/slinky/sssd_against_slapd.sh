#!/bin/sh
# Runs sssd with a generated sssd.conf against a test slapd and prints what a login pod would see. Started by
# tests/slinky/test_sssd.py inside `unshare --mount --pid --fork`: /run, /etc/sssd, /var/lib/sss,
# /var/log/sssd, /etc/pam.d and nsswitch.conf are this namespace's own, so the machine's are never touched,
# and slapd and sssd die with the namespace.
#
# $1: the work directory: slapd.conf, data.ldif, sssd.conf, ldap-ca.pem, nsswitch.conf. $2: slapd's port.
# Prints `passwd: <entry>`, `group: <entry>`, `keys: <key>` and `access <user>: <pam_acct_mgmt result>`, or
# `unresolved` when sssd never answers for alice.
set -eu
work=$1
port=$2

slapadd -q -f "$work/slapd.conf" -l "$work/data.ldif"
slapd -h "ldap://127.0.0.1:$port/" -f "$work/slapd.conf"
tries=0
until ldapwhoami -x -H "ldap://127.0.0.1:$port/" >/dev/null 2>&1; do
  tries=$((tries + 1))
  [ "$tries" -lt 100 ] || { echo "slapd did not start" >&2; exit 1; }
  sleep 0.1
done

for dir in /run /etc/sssd /var/lib/sss /var/log/sssd /etc/pam.d; do
  mount -t tmpfs tmpfs "$dir"
done
mkdir -p /var/lib/sss/db /var/lib/sss/pipes/private /var/lib/sss/mc
install -m 0600 "$work/sssd.conf" /etc/sssd/sssd.conf
install -m 0644 "$work/ldap-ca.pem" /etc/sssd/ldap-ca.pem
mount --bind "$work/nsswitch.conf" /etc/nsswitch.conf
echo "account required pam_sss.so" >/etc/pam.d/slurm-eks-test
sssd -i --logger=stderr 2>"$work/sssd.log" &

tries=0
until entry=$(getent -s sss passwd alice); do
  tries=$((tries + 1))
  [ "$tries" -lt "${SSSD_TRIES:-100}" ] || { echo unresolved; exit 0; }
  sleep 0.2
done
echo "passwd: $entry"
echo "group: $(getent -s sss group llm)"
echo "keys: $(sss_ssh_authorizedkeys alice)"
for user in alice bob; do
  echo "access $user: $(sssctl user-checks "$user" -a acct -s slurm-eks-test 2>&1 | sed -n 's/^pam_acct_mgmt: //p')"
done
