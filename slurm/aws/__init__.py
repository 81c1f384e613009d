"""AWS Query API calls with the standard library only (SigV4, IRSA web identity credentials): the node lifecycle
controller runs in Slinky's login image, which has python3 but no boto3."""
