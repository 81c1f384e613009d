# The checkpoint manager (jobs/checkpoint_store; storage.checkpointStore): this job's newest complete checkpoint
# goes to {{ sync.s3 }} every {{ sync.interval_seconds }} s (the newest {{ sync.keep }} are kept there), and a start whose
# directory has no complete checkpoint (a requeue after /shared lost it) first restores the newest from there.
# One step on the first node, in the job's image, beside training (srun --overlap: "allows steps to share all
# resources (CPUs, memory, and GRES)", srun(1) of 25.11). Credentials: boto3's chain in the step's environment;
# in the cluster, the role and token the NodeSet pods mount for jobs (components/slinky/job_aws.py).
if [[ -r {{ job_env_file }} ]]; then
  set -a
  # shellcheck disable=SC1091  # mounted on the node, not here
  . {{ job_env_file }}
  set +a
fi
CHECKPOINT_S3={{ sync.s3|q }}
SYNC_FINISH="${SLURM_EKS_CHECKPOINT_DIR}/.sync-finish"
rm -f "${SYNC_FINISH}"
checkpoint_store() {
  srun --overlap --nodes=1 --ntasks=1 {{ store_container_flags }}env PYTHONPATH={{ code_root }}"${PYTHONPATH:+:${PYTHONPATH}}" \
    {{ t.python|q }} -m jobs.checkpoint_store "$@" --s3 "${CHECKPOINT_S3}" --job-dir "${SLURM_EKS_CHECKPOINT_DIR}"
}
if ! checkpoint_store restore; then
  echo "slurm-eks: could not restore this job's checkpoints from ${CHECKPOINT_S3} (above: why); not starting over them from step 0" >&2
  exit 1
fi
checkpoint_store watch --interval {{ sync.interval_seconds }} --keep {{ sync.keep }} --compression {{ sync.compression }} \
  --finish "${SYNC_FINISH}" &
SYNC_PID=$!
# After training: one last copy (the checkpoint a preemption just wrote), before the job requeues or ends.
finish_checkpoint_sync() {
  touch "${SYNC_FINISH}"
  wait "${SYNC_PID}" || echo "slurm-eks: the checkpoint copier failed; ${CHECKPOINT_S3} may lack the newest checkpoint" >&2
}
