"""`cg-ray report RUN_DIR`: one self-contained HTML file with the paper's figures and tables."""
