"""The Bundle manifest v1 of ``org.vllm-hust.dla`` (group ``vllm_hust.extension_bundles``)."""
