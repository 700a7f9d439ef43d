import unittest

from statkit import median


class HiddenMedianTest(unittest.TestCase):
    def test_even_floats(self):
        self.assertEqual(median([1.0, 2.0, 10.0, 20.0]), 6.0)

    def test_two_values(self):
        self.assertEqual(median([7, 9]), 8)

    def test_odd_unchanged(self):
        self.assertEqual(median([5, 1, 9, 3, 7]), 5)

    def test_empty_raises(self):
        with self.assertRaises(ValueError):
            median([])
