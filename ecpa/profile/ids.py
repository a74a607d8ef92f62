"""The profile's own names (PROFILE §1), in a module that imports nothing: ``ecpa --version``
says them without loading the statement's models."""

__all__ = ["PROFILE_ID", "STATEMENT_SCHEMA"]

STATEMENT_SCHEMA = "ecpa-attestation-statement/0.1"
PROFILE_ID = "ecpa-jcs-jws-eddsa/0.1"
