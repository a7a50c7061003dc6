"""README.md and docs/: README stays a user's guide, and its links and docs/'s resolve."""

import pathlib


def test_readme_is_a_guide_and_its_links_resolve():
  """README stays a user's guide (at most 300 lines; the rest is in docs/), and every docs/ link in it or in
  docs/ points at a file that exists."""
  import re
  root = pathlib.Path(__file__).resolve().parents[1]
  readme = (root / "README.md").read_text()
  assert readme.count("\n") <= 300
  for page in [root / "README.md", *sorted((root / "docs").rglob("*.md"))]:
    for target in re.findall(r"\]\(((?:\.\./)*docs/[^)#]+|[^):#]+\.md)\)", page.read_text()):
      assert (page.parent / target).resolve().exists() or (root / target).exists(), (page, target)
