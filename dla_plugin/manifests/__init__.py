"""The extension bundle manifest v1 of ``org.vllm-hust.dla`` (``vllm-hust-extension-v1.json``),
registered as entry point ``org.vllm-hust.dla`` of group ``vllm.extension_bundles``: the host
reads it from installed metadata without importing any code (DLA.md "Identity")."""
