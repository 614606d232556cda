// ESLint: typescript-eslint's type-aware recommended rules on everything we write; the layout is Prettier's.
import js from '@eslint/js';
import prettier from 'eslint-config-prettier';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/', 'bench/scratch/', '.data/'] },
  js.configs.recommended,
  tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      // Async by contract, not by accident: fastify's plugins, hooks and handlers, and the stores whose
      // Redis twin awaits, are async functions that may have nothing to await. Floating and misused
      // promises, the bugs this rule stands in for, are checked by their own rules.
      '@typescript-eslint/require-await': 'off',
      // A leading underscore names what is left out on purpose (a rest sibling, an unused parameter).
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', ignoreRestSiblings: true },
      ],
    },
  },
  // Plain JavaScript: worker fixtures for node, the playground for the browser; no types to check.
  {
    files: ['**/*.{js,mjs}'],
    extends: [tseslint.configs.disableTypeChecked],
    languageOptions: { globals: globals.node },
  },
  { files: ['src/http/playground/**'], languageOptions: { globals: globals.browser } },
  prettier,
);
