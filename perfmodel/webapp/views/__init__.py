"""One module per page. Streamlit runs each file as a script (__name__ == "__main__"),
which calls its render(); importing a module runs nothing."""
