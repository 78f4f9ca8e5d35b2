//! [`PathTree`]: the directories one unpack has created or checked, so that each
//! entry's parents cost one step per path component (see the cost note of
//! [`super`]).

use std::collections::HashMap;

/// A set of paths (component lists) kept as a tree: looking up, adding or removing a
/// path costs one step per component, whatever else the set holds; removing a path
/// removes everything below it.
#[derive(Debug, Default)]
pub(super) struct PathTree {
    children: HashMap<String, PathTree>,
    /// The path ending here is in the set (not only a prefix of one that is).
    member: bool,
}

impl PathTree {
    pub(super) fn node(&self, path: &[String]) -> Option<&PathTree> {
        path.iter().try_fold(self, |n, c| n.children.get(c))
    }

    /// `path` itself is in the set.
    pub(super) fn contains(&self, path: &[String]) -> bool {
        self.node(path).is_some_and(|n| n.member)
    }

    /// `path` or a path below it was added (removals aside).
    pub(super) fn covers(&self, path: &[String]) -> bool {
        self.node(path).is_some()
    }

    pub(super) fn insert(&mut self, path: &[String]) {
        let mut n = self;
        for c in path {
            if !n.children.contains_key(c) {
                n.children.insert(c.clone(), PathTree::default());
            }
            let Some(next) = n.children.get_mut(c) else {
                return;
            };
            n = next;
        }
        n.member = true;
    }

    /// Removes `path` and every path below it.
    pub(super) fn remove(&mut self, path: &[String]) {
        let Some((last, parent)) = path.split_last() else {
            self.children.clear();
            return;
        };
        let mut n = self;
        for c in parent {
            match n.children.get_mut(c) {
                Some(child) => n = child,
                None => return,
            }
        }
        n.children.remove(last);
    }

    /// How many leading components of `path` name members, each after the other.
    pub(super) fn member_prefix(&self, path: &[String]) -> usize {
        let mut n = self;
        for (i, c) in path.iter().enumerate() {
            match n.children.get(c) {
                Some(child) if child.member => n = child,
                _ => return i,
            }
        }
        path.len()
    }
}
