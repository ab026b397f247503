# src/ops
