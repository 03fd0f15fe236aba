"""What the analyses report against: the paper's reported values, and claims with a fixed verdict vocabulary."""
