"""Day two: a change judged against what is deployed (the record `up` leaves), by each key's update policy
(components/config/update_policy.py) and the providers' replace-triggering properties."""
