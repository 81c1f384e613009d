"""Storage: FSx for Lustre (/shared, linked to S3) and EFS (/models), each with its CSI driver, and the static
claims that bind them in a namespace.

Layer: above kubernetes, aws and config; beside compute, which it never imports.
"""
