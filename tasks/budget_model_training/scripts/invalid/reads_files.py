"""A TorchScript model whose forward reads a file of the evaluation machine
(torch.from_file, the operator aten::from_file).

expect: uses the operator aten::from_file, which is not allowed
"""
import mlrb_invalid_images as I

I.reads_files("/etc/hostname")
