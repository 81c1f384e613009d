# Evaluation after training (`job render --evaluate`; jobs/evaluate.py): once this job has ended well, a one-node job
# on {{ t.partition }} computes the newest checkpoint's held-out perplexity into <checkpoint>.eval.json{% if registry %} and
# registers it as a version of {{ evaluate.model }} in the cluster's MLflow{% endif %}. Submitted from here with
# --dependency=afterok on this job: it "can begin execution after the specified jobs have successfully executed (ran
# to completion with an exit code of zero)" (sbatch(1) of 25.11); sbatch is in Slinky's slurmd image
# (SlinkyProject/containers schedmd/slurm/25.11/ubuntu24.04/Dockerfile: its slurmd stage installs slurm-smd-client).
submit_evaluation() {
  local log uri="" exports dependency="afterok:${SLURM_JOB_ID}"
  log="$(scontrol show job -o "${SLURM_JOB_ID}" 2>/dev/null | sed -n 's/.* StdOut=\([^ ]*\).*/\1/p')" || true
{% if sync %}
  uri="${CHECKPOINT_S3}/$(id -un)/$(basename "${SLURM_EKS_CHECKPOINT_DIR}")"
{% endif %}
  exports="ALL,SLURM_EKS_EVAL_CHECKPOINT=${SLURM_EKS_CHECKPOINT_DIR},SLURM_EKS_TRAINING_LOG=${log},SLURM_EKS_TRAINING_JOB_ID=${SLURM_JOB_ID},SLURM_EKS_CHECKPOINT_URI=${uri},SLURM_EKS_IMAGE=${SLURM_EKS_IMAGE:-}"
  (
    # Without this job's own Slurm variables (SLURM_CPUS_PER_TASK, SLURM_TRES_PER_TASK, ...): with --export=ALL
    # they would reach the evaluation job, whose srun then refuses its own ("cpus-per-task set by two different
    # environment variables", seen on the twin).
    while read -r name; do unset "${name}"; done < <(compgen -e | grep '^SLURM_' | grep -v '^SLURM_EKS_')
    sbatch --parsable --dependency="${dependency}" --job-name={{ evaluate.job_name|q }} \
      --partition={{ t.partition }} --nodes=1 --ntasks=1{% if t.gpus_per_node %} --gpus-per-node=1{% endif %} --time={{ evaluate.time }} \
      --open-mode=append --output={{ t.logs_dir }}/%x-%j.out --export="${exports}" <<'EVALUATE'
#!/bin/bash
set -euo pipefail
export SLURM_EKS_STACK={{ (t.stack or "")|q }}
{% if registry %}
export MLFLOW_TRACKING_URI="${MLFLOW_TRACKING_URI:-{{ registry }}}"
{% endif %}
srun {{ container_flags }}env PYTHONPATH={{ code_root }}"${PYTHONPATH:+:${PYTHONPATH}}" {{ t.python|q }} {{ evaluate.entry }} \
  --checkpoint "${SLURM_EKS_EVAL_CHECKPOINT}" ${SLURM_EKS_TRAINING_LOG:+--training-log "${SLURM_EKS_TRAINING_LOG}"} \
  --registered-model {{ evaluate.model|q }}{{ evaluate.flags }} -- {{ evaluate.model_flags }}
EVALUATE
  )
}
