"""The checkpoint store: a job's complete checkpoints copied to S3 as they are written (verified, compressed where it
pays, the newest `keep` kept), listed, restored and pruned; and the job's start restoring the newest from S3 when
its directory on /shared has none. Runs in the job's own image (standard library, boto3; zstandard when present)."""
